"""decode_speed.py --rounds N [--load N]: every system alone in a fresh process each round, taking
turns, then again beside N busy processes; the medians of per-round ratios (harness.py)."""

import json
import sys
import tempfile
from pathlib import Path

import harness

from transformer_mt.markdown import markdown_table


def in_rounds(args, setup: tuple[str, ...], systems: tuple[str, ...], pairs: tuple[tuple[str, str], ...],
              searches: tuple[str, ...]) -> None:
    """--rounds: each system alone in a fresh process (--script: this one, --only SYSTEM), the order
    rotated every round, with --load again beside busy processes right after; per pair and search
    each round's ratio of seconds (peer / ours: x > 1, ours is faster) and their median; with --load
    the same beside the busy processes, and each system's loaded / quiet time. setup: decode_speed's
    setup options passed on; systems, pairs (ours, peer) and searches: what it compares."""
    given = [f"--{name.replace('_', '-')}={getattr(args, name)}" for name in setup if getattr(args, name) is not None]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "one.json"

        def one(system: str, load: int = 0) -> dict:
            harness.in_process([sys.executable, str(args.script), "--ckpt", args.ckpt, "--source", args.source,
                                "--reference", args.reference, "--repeat", "1", "--only", system, "--json", str(out),
                                *given, *(["--limit", str(args.limit)] if args.limit else [])], load)
            return {row["search"]: row for row in json.loads(out.read_text())["systems"]}

        measured = harness.rounds({s: lambda s=s: {"quiet": one(s), **({"loaded": one(s, args.load)} if args.load
                                                                       else {})} for s in systems}, args.rounds,
                                  "decode_speed")
    quiet, loaded = ([{s: m[s][key] for s in systems} for m in measured] if args.load or key == "quiet" else []
                     for key in ("quiet", "loaded"))
    result = {**harness.machine(), "setup": " ".join(given), "rounds": quiet,
              **({"loaded": loaded} if args.load else {})}
    text = [f"{harness.described(result)}; {args.rounds} rounds, one engine per process; {' '.join(given)}"]
    for name, rounds in (("ratios", quiet), *((("loaded_ratios", loaded),) if args.load else ())):
        result[name] = [{**r, "ours": a, "peer": b, "bleu": (rounds[0][a][k]["bleu"], rounds[0][b][k]["bleu"])}
                        for a, b in pairs for k in searches for r in harness.ratios(
                            rounds, [(a, b)], lambda m, k=k: m[k]["seconds"], search=k)]
        text += ["", *([f"Beside {args.load} busy processes:", ""] if name == "loaded_ratios" else []), markdown_table(
            ["search", "ours", "peer", "median (x > 1: ours is faster)", "rounds", "BLEU ours / peer"],
            [[r["search"], r["ours"], r["peer"], f"{r['median']:.2f}x", " / ".join(f"{x:.2f}" for x in r["rounds"]),
              "{:.2f} / {:.2f}".format(*r["bleu"])] for r in result[name]], right=(3,))]
    if args.load:
        result["slowdowns"] = [{"system": s, **r} for s in systems for search in searches for r in harness.ratios(
            [{"quiet": q[s], "loaded": b[s]} for q, b in zip(quiet, loaded)], [("quiet", "loaded")],
            lambda m, k=search: m[k]["seconds"], search=search)]
        text += ["", "Loaded / quiet time, each system (medians of the rounds):", "", markdown_table(
            ["search", *systems], [[k, *(f"{r['median']:.2f}x" for r in result["slowdowns"] if r["search"] == k)]
                                   for k in searches], right=range(1, 1 + len(systems)))]
    harness.emit(result, "\n".join(text), args.json)
