"""A vocabulary shortlist's speed and BLEU (decoding.shortlist, issue 80): task=translate with and
without it, fp32 and int8, beam 4.

    python experiments/benchmarks/shortlist_speed.py --ckpt CKPT --source SRC --reference REF
        [--candidates K] [--frequent F] [--scoring probability] [--rounds 3] [--json PATH] [--run-py PATH]
        [-- OVERRIDE ...]

task=shortlist builds the table of a copy of the checkpoint (DATA_DIR must lead to its corpus); each
variant is a fresh `python run.py task=translate` process, the order rotated every round
(harness.py); per round without / with seconds (task=translate's own), and their median.
OVERRIDEs go to every task=translate; --run-py: another run.py.
"""

import re
import shutil
import sys
import tempfile
from pathlib import Path

import harness
import sacrebleu

VARIANTS = ("fp32", "fp32 shortlist", "int8", "int8 shortlist")
PAIRS = (("fp32 shortlist", "fp32"), ("int8 shortlist", "int8"))  # (with, without): x > 1, the shortlist is faster
SECONDS = re.compile(r"translated (\d+) lines in ([\d.]+) s")


def translate(variant: str, ckpt: Path, args, folder: Path) -> dict:
    """task=translate of `variant` in a process of its own: its seconds and the BLEU of its output."""
    name = variant.replace(" ", "_")
    output, run_dir = folder / f"{name}.txt", folder / f"run_{name}"
    shutil.rmtree(run_dir, ignore_errors=True)
    harness.in_process([sys.executable, str(args.run_py), "task=translate", f"ckpt_path={ckpt}",
                        f"task.input={args.source}", f"task.output={output}", "decoding=beam", "decoding.beam_size=4",
                        f"quantize={'int8' if variant.startswith('int8') else 'none'}",
                        f"decoding.shortlist={'true' if variant.endswith('shortlist') else 'false'}", *args.overrides,
                        f"hydra.run.dir={run_dir}"])
    seconds = float(SECONDS.findall((run_dir / "run.log").read_text(encoding="utf-8"))[-1][1])
    references = Path(args.reference).read_text(encoding="utf-8").splitlines()
    return {"seconds": seconds, "bleu": sacrebleu.corpus_bleu(output.read_text(encoding="utf-8").splitlines(),
                                                              [references]).score}


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--ckpt", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--reference", required=True)
    parser.add_argument("--candidates", type=int, default=30)  # task=shortlist's defaults
    parser.add_argument("--frequent", type=int, default=300)
    parser.add_argument("--scoring", default="probability")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--run-py", type=Path, default=harness.ROOT / "run.py")
    parser.add_argument("overrides", nargs="*", help="more task=translate overrides (after --)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        ckpt = folder / Path(args.ckpt).name
        shutil.copy(args.ckpt, ckpt)
        harness.in_process([sys.executable, str(args.run_py), "task=shortlist", f"ckpt_path={ckpt}",
                            f"task.candidates={args.candidates}", f"task.frequent={args.frequent}",
                            f"task.scoring={args.scoring}", f"hydra.run.dir={folder / 'run_shortlist'}"])
        measured = harness.rounds({v: lambda v=v: translate(v, ckpt, args, folder) for v in VARIANTS}, args.rounds,
                                  "shortlist_speed")
    table = harness.ratios(measured, PAIRS, lambda m: m["seconds"])
    bleu = {variant: measured[-1][variant]["bleu"] for variant in VARIANTS}
    from transformer_mt.markdown import markdown_table

    text = markdown_table(["without", "with", "speed-up (median)", "rounds", "BLEU without / with"],
                          [[r["b"], r["a"], f"{r['median']:.2f}x", " / ".join(f"{x:.2f}" for x in r["rounds"]),
                            f"{bleu[r['b']]:.2f} / {bleu[r['a']]:.2f}"] for r in table], right=(2,))
    machine = harness.machine()
    harness.emit({**machine, "options": {k: str(v) for k, v in vars(args).items()}, "rounds": measured, "bleu": bleu,
                  "ratios": table},
                 f"{harness.described(machine)}; beam 4; table: {args.scoring}, K={args.candidates}, "
                 f"F={args.frequent}; {args.rounds} rounds, a process per run\n\n{text}", args.json)


if __name__ == "__main__":
    main()
