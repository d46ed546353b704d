"""Decoding speed, one engine per process: decode_speed.py --only SYSTEM run in a fresh process for
each system in turn, round after round (the order rotated every round), so that no two engines'
thread pools share a process and a slower spell of the machine hits every system alike. Per round,
each pair's ratio of seconds (peer / ours: x > 1, ours is faster); the median over the rounds.

    python experiments/benchmarks/decode_rounds.py --ckpt CKPT --source SRC --reference REF
        [--rounds 5] [--limit N] [--load N] [--json PATH] [decode_speed.py's setup options]

The pairs: ours float32 against CTranslate2 float32, ours int8 against CTranslate2 int8, ours
int8 against ours float32; greedy and beam 4 (decode_speed.py's searches, batches and limits).
decode_speed.py's setup options are passed on: --batch, --length-penalty, --inter, --intra,
--kernels (ours), --ct2-inter, --ct2-intra (CTranslate2). --load N: every system is also measured
beside N busy processes (a Python loop each; one per core is "one busy process per core"), right
after its quiet run, and the tables give the loaded ratios and each system's loaded / quiet time.
The result names the CPU (its model and the vector extensions torch and CTranslate2 may use).
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from transformer_mt.markdown import markdown_table
from transformer_mt.model.kernels import cpu

HERE = Path(__file__).resolve().parent
SYSTEMS = ("ours float32", "ours int8", "CTranslate2 float32", "CTranslate2 int8")
PAIRS = (("ours float32", "CTranslate2 float32"), ("ours int8", "CTranslate2 int8"), ("ours int8", "ours float32"))
SEARCHES = ("greedy", "beam 4")
SETUP = ("batch", "length_penalty", "inter", "intra", "kernels", "ct2_inter", "ct2_intra")  # decode_speed.py's
BUSY = "while True: pass"  # a busy process


def one(system: str, args: argparse.Namespace, folder: Path, load: int = 0) -> dict[str, dict]:
    """Seconds, target tokens/s and BLEU per search of `system`, measured in a process of its own
    (beside `load` busy processes)."""
    out = folder / "one.json"
    setup = [f"--{name.replace('_', '-')}={getattr(args, name)}" for name in SETUP if getattr(args, name) is not None]
    command = [sys.executable, str(HERE / "decode_speed.py"), "--ckpt", args.ckpt, "--source", args.source,
               "--reference", args.reference, "--repeat", "1", "--only", system, "--json", str(out), *setup,
               *(["--limit", str(args.limit)] if args.limit else [])]
    busy = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(load)]
    try:
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    finally:
        for process in busy:
            process.kill()
            process.wait()
    rows = json.loads(out.read_text())["systems"]
    return {row["search"]: {"seconds": row["seconds"], "bleu": row["bleu"], "tokens_per_s": row.get("tokens_per_s")}
            for row in rows}


def rounds(args: argparse.Namespace) -> tuple[list[dict], list[dict]]:
    """Every round's figures, quiet and (with --load) loaded: {system: {search: {seconds, bleu}}}."""
    quiet, loaded = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            order = SYSTEMS[r % len(SYSTEMS):] + SYSTEMS[:r % len(SYSTEMS)]
            quiet.append({})
            loaded.append({}) if args.load else None
            for system in order:
                quiet[-1][system] = one(system, args, Path(tmp))
                if args.load:
                    loaded[-1][system] = one(system, args, Path(tmp), args.load)
            print(f"round {r + 1} of {args.rounds} done", file=sys.stderr)
    return quiet, loaded


def ratios(measured: list[dict]) -> list[dict]:
    """Per pair and search: each round's ratio peer / ours, and their median."""
    out = []
    for ours, peer in PAIRS:
        for search in SEARCHES:
            per_round = [m[peer][search]["seconds"] / m[ours][search]["seconds"] for m in measured]
            out.append({"ours": ours, "peer": peer, "search": search, "rounds": per_round,
                        "median": statistics.median(per_round), "bleu": (measured[0][ours][search]["bleu"],
                                                                         measured[0][peer][search]["bleu"])})
    return out


def slowdowns(quiet: list[dict], loaded: list[dict]) -> list[dict]:
    """Per system and search: each round's loaded / quiet seconds, and their median."""
    out = []
    for system in SYSTEMS:
        for search in SEARCHES:
            per_round = [b[system][search]["seconds"] / a[system][search]["seconds"] for a, b in zip(quiet, loaded)]
            out.append({"system": system, "search": search, "rounds": per_round,
                        "median": statistics.median(per_round)})
    return out


def print_ratios(table: list[dict]) -> None:
    print(markdown_table(["search", "ours", "peer", "median (x > 1: ours is faster)", "rounds", "BLEU ours / peer"],
                         [[r["search"], r["ours"], r["peer"], f"{r['median']:.2f}x",
                           " / ".join(f"{x:.2f}" for x in r["rounds"]), "{:.2f} / {:.2f}".format(*r["bleu"])]
                          for r in table], right=(3,)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ckpt", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--reference", required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--limit", type=int, help="only the first N sentences")
    parser.add_argument("--load", type=int, default=0, help="also measure beside N busy processes")
    parser.add_argument("--json", type=Path)
    for name in SETUP:
        parser.add_argument(f"--{name.replace('_', '-')}", help="passed on to decode_speed.py")
    args = parser.parse_args()
    quiet, loaded = rounds(args)
    machine = cpu()
    given = " ".join(f"--{n.replace('_', '-')}={getattr(args, n)}" for n in SETUP if getattr(args, n) is not None)
    print(f"CPU: {machine['model']} ({', '.join(machine['flags']) or 'no AVX2'}); {args.rounds} rounds, "
          f"one engine per process{'; ' + given if given else ''}\n")
    result = {"cpu": machine, "setup": given, "rounds": quiet, "ratios": ratios(quiet)}
    print_ratios(result["ratios"])
    if args.load:
        result.update(loaded=loaded, loaded_ratios=ratios(loaded), slowdowns=slowdowns(quiet, loaded))
        print(f"\nBeside {args.load} busy processes:\n")
        print_ratios(result["loaded_ratios"])
        print("\nLoaded / quiet time, each system (medians of the rounds):\n")
        print(markdown_table(["search", *SYSTEMS],
                             [[search, *(f"{r['median']:.2f}x" for r in result["slowdowns"] if r["search"] == search)]
                              for search in SEARCHES], right=range(1, 1 + len(SYSTEMS))))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
