"""The server under load (task=serve, loopback only): 1, 4, 16 and 64 concurrent clients, each
sending one sentence a request, beside offline task=translate on the same lines in the same run.

    python experiments/benchmarks/serve_load.py --ckpt CKPT --source SRC [--clients 1,4,16,64]
        [--requests 400] [--seconds 120] [--json PATH] [--run-py PATH] [-- EXTRA run.py OVERRIDES]

Per level (at most --requests requests or --seconds seconds): sentences/s, p50 / p99 latency,
errors (a status other than 200) and mix-ups (an answer that is not the offline translation of its
sentence); offline: the lines/s task=translate logs. Issue 70's targets: no lost or mixed-up
response, 16 clients >= 0.8x offline, their p99 <= 5x the median alone. --run-py: another run.py.
"""

import json
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.client import HTTPConnection
from pathlib import Path

import harness
import httpx
import numpy as np

from transformer_mt.markdown import markdown_table

RATE = re.compile(r"translated (\d+) lines in ([\d.]+) s \(([\d.]+) lines/s\)")


def summary(clients: int, latencies: list[float], seconds: float, errors: int, mixups: int) -> dict:
    """One level's figures (latencies and seconds in seconds; p99: the nearest rank, numpy's inverted_cdf)."""
    return {"clients": clients, "requests": len(latencies) + errors, "sentences_per_s": len(latencies) / seconds,
            "p50_ms": 1000 * statistics.median(latencies) if latencies else None,
            "p99_ms": 1000 * float(np.percentile(latencies, 99, method="inverted_cdf")) if latencies else None,
            "errors": errors, "mixups": mixups, "seconds": seconds, "latencies_ms": [1000 * t for t in latencies]}


def offline(args, lines: list[str], folder: Path) -> tuple[float, list[str]]:
    """task=translate on `lines`: the lines/s it logs, and its translations."""
    (folder / "in.txt").write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    result = subprocess.run([sys.executable, str(args.run_py), "task=translate", f"ckpt_path={args.ckpt}",
                             f"task.input={folder}/in.txt", f"task.output={folder}/out.txt",
                             f"hydra.run.dir={folder}/translate", *args.extra], capture_output=True, text=True,
                            check=True, cwd=harness.ROOT)
    found = RATE.search(result.stdout + result.stderr)
    return float(found[3]), (folder / "out.txt").read_text(encoding="utf-8").splitlines()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(args, folder: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    process = subprocess.Popen([sys.executable, str(args.run_py), "task=serve", f"ckpt_path={args.ckpt}",
                                f"task.port={port}", f"hydra.run.dir={folder}/serve", *args.extra],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return process, url
        except httpx.TransportError:
            time.sleep(0.2)
    process.kill()
    raise SystemExit("the server did not start")


def level(url: str, clients: int, lines: list[str], expected: list[str], args) -> dict:
    """`clients` threads, each sending one line a request (the lines in turn), until --requests or --seconds."""
    host, port = url.removeprefix("http://").split(":")
    counter, lock = iter(range(args.requests)), threading.Lock()
    latencies, errors, mixups = [], [0], [0]
    deadline = time.monotonic() + args.seconds

    def client() -> None:
        http = HTTPConnection(host, port, timeout=120)  # the standard library's: a light client, kept alive
        while time.monotonic() < deadline:
            with lock:
                i = next(counter, None)
            if i is None:
                break
            start = time.monotonic()
            http.request("POST", "/translate", body=json.dumps({"text": lines[i % len(lines)]}),
                         headers={"Content-Type": "application/json"})
            answer = http.getresponse()
            body = answer.read()
            took = time.monotonic() - start
            with lock:
                if answer.status != 200:
                    errors[0] += 1
                    continue
                latencies.append(took)
                mixups[0] += json.loads(body)["translations"][0]["text"] != expected[i % len(lines)]
        http.close()

    start = time.monotonic()
    with ThreadPoolExecutor(clients) as pool:
        for _ in range(clients):
            pool.submit(client)
    return summary(clients, latencies, time.monotonic() - start, errors[0], mixups[0])


def row(r: dict, rate: float, alone: float) -> list:
    """A level's row of the table: its figures, and against offline translation and the latency alone."""
    return [r["clients"], r["requests"], f"{r['sentences_per_s']:.1f}", f"{r['sentences_per_s'] / rate:.2f}",
            f"{r['p50_ms']:.0f}", f"{r['p99_ms']:.0f}", f"{r['p99_ms'] / alone:.1f}", r["errors"], r["mixups"]]


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--ckpt", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--clients", default="1,4,16,64")
    parser.add_argument("--requests", type=int, default=400, help="requests per level, at most")
    parser.add_argument("--seconds", type=float, default=120, help="seconds per level, at most")
    parser.add_argument("--run-py", type=Path, default=harness.ROOT / "run.py")
    parser.add_argument("extra", nargs="*", help="run.py overrides for both (after --)")
    args = parser.parse_args()
    lines = [line for line in Path(args.source).read_text(encoding="utf-8").splitlines() if line.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        rate, expected = offline(args, lines, Path(tmp))
        process, url = start_server(args, Path(tmp))
        try:
            levels = [level(url, int(c), lines, expected, args) for c in args.clients.split(",")]
        finally:
            process.terminate()
            process.wait(timeout=60)
    machine, alone = harness.machine(), levels[0]["p50_ms"]
    harness.emit({**machine, "offline_sentences_per_s": rate, "levels": levels},
                 f"{harness.described(machine)}; offline task=translate: {rate:.1f} sentences/s\n\n" + markdown_table(
                     ["clients", "requests", "sentences/s", "x offline", "p50 ms", "p99 ms", "p99 / p50 alone",
                      "errors", "mix-ups"], [row(r, rate, alone) for r in levels], right=tuple(range(9))), args.json)


if __name__ == "__main__":
    main()
