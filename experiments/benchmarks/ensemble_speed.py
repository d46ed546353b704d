"""What decoding with an ensemble of two costs against one model, in one run.

    python experiments/benchmarks/ensemble_speed.py [--ckpt experiments/multi30k/multi30k_en_de.ckpt]
        [--source FILE] [--limit 500] [--rounds 3] [--json PATH]

The checkpoint alone and as both members of an ensemble (`ckpt_path=[a,a]`), greedy and beam 4, on
--limit lines (made-up English ones without --source) in length-sorted batches of 64; the systems
take turns each round (harness.py), each keeps its best time. Issue 36's bound: at most 2.2x one.
"""

from pathlib import Path

import harness
import torch
from synthetic import sentences

from transformer_mt.data.batching import Collator
from transformer_mt.decoding import BeamSearch, GreedySearch, PowerLength
from transformer_mt.decoding.ensemble import Ensemble
from transformer_mt.inference.members import load_translator
from transformer_mt.markdown import markdown_table


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--ckpt", type=Path, default=harness.ROOT / "experiments" / "multi30k" / "multi30k_en_de.ckpt")
    parser.add_argument("--source", type=Path)
    parser.add_argument("--limit", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    module = load_translator([Path(args.ckpt)], None)
    lines = args.source.read_text(encoding="utf-8").splitlines()[:args.limit] if args.source else sentences(
        args.limit, 4, 16)
    ids = sorted(module.tokenizer.encode_sources(lines), key=len)
    collate = Collator(module.pad_id, module.bos_id, module.eos_id)
    batches = [collate.pad(ids[i:i + 64]) for i in range(0, len(ids), 64)]
    systems = {"one model": module.models[0], "ensemble of two": Ensemble([module.models[0], module.models[0]])}
    searches = {"greedy": GreedySearch(), "beam 4": BeamSearch(beam_size=4, length_norm=PowerLength(1.0))}

    def decode_all(search, model) -> float:
        with torch.no_grad():
            return harness.timed(lambda: [search(model, src, module.bos_id, module.eos_id) for src in batches])[0]

    runs = {(s, m): lambda s=s, m=m: decode_all(searches[s], systems[m]) for s in searches for m in systems}
    best = harness.best(harness.rounds(runs, args.rounds, "ensemble_speed"))
    print(f"{len(lines)} sentences, {harness.described(harness.machine())}, best of {args.rounds} rounds\n")
    rows = [{"search": s, "system": m, "seconds": best[s, m], "ratio": best[s, m] / best[s, "one model"]}
            for s, m in best]
    harness.emit({**harness.machine(), "sentences": len(lines), "rounds": args.rounds, "rows": rows},
                 markdown_table(["search", "system", "seconds", "sentences/s", "ensemble / one"],
                                [[r["search"], r["system"], f"{r['seconds']:.2f}", f"{len(lines) / r['seconds']:.0f}",
                                  f"{r['ratio']:.2f}"] for r in rows], right=(2, 3, 4)), args.json)


if __name__ == "__main__":
    main()
