"""The server under load (task=serve, loopback only): 1, 4, 16 and 64 concurrent clients, each
sending one sentence a request, beside offline task=translate on the same lines in the same run.

    python experiments/benchmarks/serve_load.py --ckpt CKPT --source SRC [--clients 1,4,16,64]
        [--requests 400] [--seconds 120] [--json PATH] [-- EXTRA run.py OVERRIDES]

Per level: throughput (sentences/s), p50 / p99 latency of a request, errors (a status other than
200) and mix-ups (a response that is not the offline translation of its own sentence: both decode
greedily with the same options, so each answer must be it). Offline: the lines/s task=translate
logs for the same lines (its translating alone, not its start). Bounded: each level stops after
--requests requests or --seconds seconds. The targets (issue 70): no lost or mixed-up response,
throughput at 16 clients >= 0.8x offline, p99 at 16 clients <= 5x the median latency alone."""

import argparse
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

import httpx

from transformer_mt.markdown import markdown_table
from transformer_mt.model.kernels import cpu

ROOT = Path(__file__).resolve().parents[2]
RATE = re.compile(r"translated (\d+) lines in ([\d.]+) s \(([\d.]+) lines/s\)")


def percentile(values: list[float], share: float) -> float:
    """The value below which `share` of `values` lie (nearest rank: the ceil(share * n)-th smallest)."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * share // 1))
    return ordered[int(rank) - 1]


def summary(clients: int, latencies: list[float], seconds: float, errors: int, mixups: int) -> dict:
    """One level's figures (latencies and seconds in seconds)."""
    return {"clients": clients, "requests": len(latencies) + errors, "sentences_per_s": len(latencies) / seconds,
            "p50_ms": 1000 * statistics.median(latencies) if latencies else None,
            "p99_ms": 1000 * percentile(latencies, 0.99) if latencies else None, "errors": errors, "mixups": mixups}


def offline(args: argparse.Namespace, lines: list[str], folder: Path) -> tuple[float, list[str]]:
    """task=translate on `lines`: the lines/s it logs, and its translations."""
    (folder / "in.txt").write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    result = subprocess.run([sys.executable, str(ROOT / "run.py"), "task=translate", f"ckpt_path={args.ckpt}",
                             f"task.input={folder}/in.txt", f"task.output={folder}/out.txt",
                             f"hydra.run.dir={folder}/translate", *args.extra], capture_output=True, text=True,
                            check=True)
    found = RATE.search(result.stdout + result.stderr)
    return float(found[3]), (folder / "out.txt").read_text(encoding="utf-8").splitlines()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(args: argparse.Namespace, folder: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    process = subprocess.Popen([sys.executable, str(ROOT / "run.py"), "task=serve", f"ckpt_path={args.ckpt}",
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


def level(url: str, clients: int, lines: list[str], expected: list[str], args: argparse.Namespace) -> dict:
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
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ckpt", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--clients", default="1,4,16,64")
    parser.add_argument("--requests", type=int, default=400, help="requests per level, at most")
    parser.add_argument("--seconds", type=float, default=120, help="seconds per level, at most")
    parser.add_argument("--json", type=Path)
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
    machine = cpu()
    alone = levels[0]["p50_ms"]
    print(f"CPU: {machine['model']}; offline task=translate: {rate:.1f} sentences/s\n")
    print(markdown_table(["clients", "requests", "sentences/s", "x offline", "p50 ms", "p99 ms", "p99 / p50 alone",
                          "errors", "mix-ups"],
                         [row(r, rate, alone) for r in levels], right=tuple(range(9))))
    if args.json:
        args.json.write_text(json.dumps({"cpu": machine, "offline_sentences_per_s": rate, "levels": levels},
                                        indent=1) + "\n")


if __name__ == "__main__":
    main()
