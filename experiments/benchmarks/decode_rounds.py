"""Decoding speed, one engine per process: decode_speed.py --only SYSTEM run in a fresh process for
each system in turn, round after round (the order rotated every round), so that no two engines'
thread pools share a process and a slower spell of the machine hits every system alike. Per round,
each pair's ratio of seconds (peer / ours: x > 1, ours is faster); the median over the rounds.

    python experiments/benchmarks/decode_rounds.py --ckpt CKPT --source SRC --reference REF
        [--rounds 5] [--limit N] [--json PATH]

The pairs: ours float32 against CTranslate2 float32, ours int8 against CTranslate2 int8, ours
int8 against ours float32; greedy and beam 4 (decode_speed.py's searches, batches and limits).
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

HERE = Path(__file__).resolve().parent
SYSTEMS = ("ours float32", "ours int8", "CTranslate2 float32", "CTranslate2 int8")
PAIRS = (("ours float32", "CTranslate2 float32"), ("ours int8", "CTranslate2 int8"), ("ours int8", "ours float32"))
SEARCHES = ("greedy", "beam 4")
FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_int8")


def cpu() -> dict:
    """The CPU's model name and which of FLAGS it has (from /proc/cpuinfo)."""
    info = Path("/proc/cpuinfo").read_text(encoding="utf-8") if Path("/proc/cpuinfo").is_file() else ""
    fields = {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in info.splitlines() if ":" in line)}
    flags = fields.get("flags", "").split()
    family = f" (family {fields['cpu family']}, model {fields['model']})" if "cpu family" in fields else ""
    return {"model": fields.get("model name", "unknown") + family, "flags": [f for f in FLAGS if f in flags]}


def one(system: str, args: argparse.Namespace, folder: Path) -> dict[str, dict]:
    """Seconds and BLEU per search of `system`, measured in a process of its own."""
    out = folder / "one.json"
    command = [sys.executable, str(HERE / "decode_speed.py"), "--ckpt", args.ckpt, "--source", args.source,
               "--reference", args.reference, "--repeat", "1", "--only", system, "--json", str(out),
               *(["--limit", str(args.limit)] if args.limit else [])]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    rows = json.loads(out.read_text())["systems"]
    return {row["search"]: {"seconds": row["seconds"], "bleu": row["bleu"]} for row in rows}


def rounds(args: argparse.Namespace) -> list[dict[str, dict[str, float]]]:
    """Every round's figures: {system: {search: {seconds, bleu}}}."""
    measured = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            order = SYSTEMS[r % len(SYSTEMS):] + SYSTEMS[:r % len(SYSTEMS)]
            measured.append({system: one(system, args, Path(tmp)) for system in order})
            print(f"round {r + 1} of {args.rounds} done", file=sys.stderr)
    return measured


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ckpt", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--reference", required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--limit", type=int, help="only the first N sentences")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    measured = rounds(args)
    table = ratios(measured)
    machine = cpu()
    print(f"CPU: {machine['model']} ({', '.join(machine['flags']) or 'no AVX2'}); {args.rounds} rounds, "
          "one engine per process\n")
    print(markdown_table(["search", "ours", "peer", "median (x > 1: ours is faster)", "rounds", "BLEU ours / peer"],
                         [[r["search"], r["ours"], r["peer"], f"{r['median']:.2f}x",
                           " / ".join(f"{x:.2f}" for x in r["rounds"]), "{:.2f} / {:.2f}".format(*r["bleu"])]
                          for r in table], right=(3,)))
    if args.json:
        args.json.write_text(json.dumps({"cpu": machine, "rounds": measured, "ratios": table}, indent=1) + "\n")


if __name__ == "__main__":
    main()
