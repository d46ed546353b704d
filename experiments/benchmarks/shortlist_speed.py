"""A vocabulary shortlist's speed and BLEU (decoding.shortlist, issue 80): task=translate with and
without it, fp32 and int8, each variant in a fresh `python run.py` process, the order rotated every
round; per round the ratio of seconds (without / with: x > 1, the shortlist is faster), and their
median. The seconds are task=translate's own ("translated N lines in X s": loading excluded).

    python experiments/benchmarks/shortlist_speed.py --ckpt CKPT --source SRC --reference REF
        [--candidates K] [--frequent F] [--scoring probability] [--rounds 3] [--json PATH] [-- OVERRIDE ...]

The checkpoint is copied into a temporary folder, where task=shortlist builds its table from the
training corpus the checkpoint records (DATA_DIR must lead to it); each translation is beam 4. The
result names the CPU (decode_rounds.py's `cpu`). OVERRIDEs go to every task=translate command.
"""

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import sacrebleu

from transformer_mt.markdown import markdown_table

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
VARIANTS = ("fp32", "fp32 shortlist", "int8", "int8 shortlist")
PAIRS = (("fp32", "fp32 shortlist"), ("int8", "int8 shortlist"))
SECONDS = re.compile(r"translated (\d+) lines in ([\d.]+) s")


def overrides(variant: str) -> list[str]:
    """task=translate's overrides of a variant (beyond the checkpoint, the files and beam 4)."""
    return [f"quantize={'int8' if variant.startswith('int8') else 'none'}",
            f"decoding.shortlist={'true' if variant.endswith('shortlist') else 'false'}"]


def translate(variant: str, ckpt: Path, source: str, folder: Path, extra: list[str]) -> tuple[float, Path]:
    """task=translate of `variant` in a process of its own: its seconds and its output file."""
    name = variant.replace(" ", "_")
    output, run_dir = folder / f"{name}.txt", folder / f"run_{name}"
    shutil.rmtree(run_dir, ignore_errors=True)
    command = [sys.executable, str(ROOT / "run.py"), "task=translate", f"ckpt_path={ckpt}", f"task.input={source}",
               f"task.output={output}", "decoding=beam", "decoding.beam_size=4", *overrides(variant), *extra,
               f"hydra.run.dir={run_dir}"]
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    if done.returncode:
        sys.exit(f"{variant} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    found = SECONDS.findall((run_dir / "run.log").read_text(encoding="utf-8"))
    return float(found[-1][1]), output


def build(ckpt: Path, args: argparse.Namespace, folder: Path) -> None:
    """task=shortlist on the copied checkpoint."""
    command = [sys.executable, str(ROOT / "run.py"), "task=shortlist", f"ckpt_path={ckpt}",
               f"task.candidates={args.candidates}", f"task.frequent={args.frequent}", f"task.scoring={args.scoring}",
               f"hydra.run.dir={folder / 'run_shortlist'}"]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)


def ratios(measured: list[dict[str, float]]) -> list[dict]:
    """Per pair: each round's ratio of seconds, without / with the shortlist, and their median."""
    out = []
    for plain, short in PAIRS:
        per_round = [m[plain] / m[short] for m in measured]
        out.append({"without": plain, "with": short, "rounds": per_round, "median": statistics.median(per_round)})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ckpt", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--reference", required=True)
    parser.add_argument("--candidates", type=int, default=30)  # task=shortlist's defaults
    parser.add_argument("--frequent", type=int, default=300)
    parser.add_argument("--scoring", default="probability")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument("overrides", nargs="*", help="more task=translate overrides (after --)")
    args = parser.parse_args()
    from decode_rounds import cpu  # a sibling script, as `python experiments/benchmarks/...` runs it

    references = Path(args.reference).read_text(encoding="utf-8").splitlines()
    measured, bleu = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        ckpt = folder / Path(args.ckpt).name
        shutil.copy(args.ckpt, ckpt)
        build(ckpt, args, folder)
        for r in range(args.rounds):
            order = VARIANTS[r % len(VARIANTS):] + VARIANTS[: r % len(VARIANTS)]
            seconds = {}
            for variant in order:
                seconds[variant], output = translate(variant, ckpt, args.source, folder, args.overrides)
                hypotheses = output.read_text(encoding="utf-8").splitlines()
                bleu[variant] = sacrebleu.corpus_bleu(hypotheses, [references]).score
            measured.append(seconds)
            print(f"round {r + 1} of {args.rounds}: " + ", ".join(f"{v} {s:.1f} s" for v, s in seconds.items()),
                  file=sys.stderr)
    table = ratios(measured)
    machine = cpu()
    print(f"CPU: {machine['model']} ({', '.join(machine['flags']) or 'no AVX2'}); beam 4; table: "
          f"{args.scoring}, K={args.candidates}, F={args.frequent}; {args.rounds} rounds, a process per run\n")
    print(markdown_table(["without", "with", "speed-up (median)", "rounds", "BLEU without / with"],
                         [[r["without"], r["with"], f"{r['median']:.2f}x", " / ".join(f"{x:.2f}" for x in r["rounds"]),
                           f"{bleu[r['without']]:.2f} / {bleu[r['with']]:.2f}"] for r in table], right=(2,)))
    if args.json:
        args.json.write_text(json.dumps({"cpu": machine, "options": vars(args) | {"json": str(args.json)},
                                         "seconds": measured, "bleu": bleu, "ratios": table}, indent=1) + "\n")


if __name__ == "__main__":
    main()
