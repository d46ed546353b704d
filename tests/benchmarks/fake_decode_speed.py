"""A stand-in for the processes of experiments/benchmarks/decode_speed.py --rounds (its --script) in
tests/benchmarks/test_decode_rounds.py: their command line, and --json written at once with seconds
known beforehand. Each call appends to $FAKE_CALLS (a JSON line): the system, decode_speed.py's setup
options given as --name=value, and how many busy processes (`while True: pass`, this process's
siblings) run beside it. The seconds of a system in its round r are $FAKE_SECONDS[system][r][search], each times
(1 + the busy processes beside it)."""

import argparse
import json
import os
from pathlib import Path


def busy_siblings() -> int:
    """The processes `python -c 'while True: pass'` whose parent is this process's parent."""
    count = 0
    for entry in Path("/proc").iterdir():
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        count += parent == os.getppid() and command[1:3] == [b"-c", b"while True: pass"]
    return count


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("--ckpt", "--source", "--reference", "--repeat", "--only", "--limit"):
        parser.add_argument(name)
    parser.add_argument("--json", type=Path)
    args, setup = parser.parse_known_args()
    calls = Path(os.environ["FAKE_CALLS"])
    earlier = [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []
    busy = busy_siblings()
    round_ = sum(c["system"] == args.only and c["busy"] == busy for c in earlier)
    with calls.open("a") as out:
        out.write(json.dumps({"system": args.only, "setup": setup, "busy": busy}) + "\n")
    seconds = json.loads(os.environ["FAKE_SECONDS"])[args.only][round_]
    rows = [{"search": search, "system": args.only, "seconds": s * (1 + busy), "bleu": 30.0}
            for search, s in zip(("greedy", "beam 4"), seconds)]
    args.json.write_text(json.dumps({"systems": rows}))


if __name__ == "__main__":
    main()
