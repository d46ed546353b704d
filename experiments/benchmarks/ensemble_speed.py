"""What decoding with an ensemble of two costs against one model, in one run.

    python experiments/benchmarks/ensemble_speed.py [--ckpt experiments/multi30k/multi30k_en_de.ckpt]
        [--source FILE] [--limit 500] [--rounds 3] [--json PATH]

The same checkpoint alone and as both members of an ensemble (`ckpt_path=[a,a]`: the same work as
two different members of its size), greedy and beam 4 (length penalty as the checkpoint says), on
the source's first --limit lines in length-sorted batches of 64 sentences; the systems take turns
in each round and each keeps its best time. Prints seconds, sentences/s and ensemble / one. Without
--source: made-up English sentences. Issue 36's bound: an ensemble of two costs at most 2.2x one.
"""

import argparse
import json
import random
import sys
import time
from pathlib import Path

import torch

from transformer_mt.decoding import BeamSearch, GreedySearch, PowerLength
from transformer_mt.decoding.ensemble import Ensemble
from transformer_mt.inference.members import load_translator
from transformer_mt.markdown import markdown_table

ROOT = Path(__file__).resolve().parents[2]
WORDS = "a man woman dog child in the on with red blue street park ball plays runs sits looks at big small".split()


def sentences(source: Path | None, limit: int) -> list[str]:
    if source is not None:
        return source.read_text(encoding="utf-8").splitlines()[:limit]
    rng = random.Random(0)
    return [" ".join(rng.choices(WORDS, k=rng.randint(4, 16))) + " ." for _ in range(limit)]


def decode_all(search, model, batches: list[torch.Tensor], bos: int, eos: int) -> float:
    start = time.perf_counter()
    with torch.no_grad():
        for src in batches:
            search(model, src, bos, eos)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ckpt", type=Path, default=ROOT / "experiments" / "multi30k" / "multi30k_en_de.ckpt")
    parser.add_argument("--source", type=Path)
    parser.add_argument("--limit", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    module = load_translator([Path(args.ckpt)], None)
    lines = sentences(args.source, args.limit)
    ids = sorted(module.tokenizer.encode_sources(lines), key=len)
    from transformer_mt.data.batching import Collator

    collate = Collator(module.pad_id, module.bos_id, module.eos_id)
    batches = [collate.pad(ids[i:i + 64]) for i in range(0, len(ids), 64)]
    systems = {"one model": module.models[0], "ensemble of two": Ensemble([module.models[0], module.models[0]])}
    searches = {"greedy": GreedySearch(), "beam 4": BeamSearch(beam_size=4, length_norm=PowerLength(1.0))}
    best = {(s, m): float("inf") for s in searches for m in systems}
    for round_ in range(args.rounds):
        for search_name, search in searches.items():
            names = list(systems) if round_ % 2 == 0 else list(systems)[::-1]  # each first in turn
            for name in names:
                seconds = decode_all(search, systems[name], batches, module.bos_id, module.eos_id)
                best[search_name, name] = min(best[search_name, name], seconds)
        print(f"[ensemble_speed] round {round_ + 1} done", file=sys.stderr, flush=True)
    print(f"{len(lines)} sentences, {torch.get_num_threads()} threads, best of {args.rounds} rounds\n")
    result = {"sentences": len(lines), "threads": torch.get_num_threads(), "rounds": args.rounds, "rows": []}
    rows = []
    for search_name in searches:
        one = best[search_name, "one model"]
        for name in systems:
            seconds = best[search_name, name]
            ratio = seconds / one
            result["rows"].append({"search": search_name, "system": name, "seconds": seconds, "ratio": ratio})
            rows.append([search_name, name, f"{seconds:.2f}", f"{len(lines) / seconds:.0f}", f"{ratio:.2f}"])
    print(markdown_table(["search", "system", "seconds", "sentences/s", "ensemble / one"], rows, right=(2, 3, 4)))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
