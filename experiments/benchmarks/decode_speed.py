"""Decoding speed (README.md): --what systems, ours against HF `generate` and CTranslate2 in this process, or
with --rounds each alone in a fresh process (--load N: beside N busy processes); --what serve, task=serve under
load; the other modes: decoders.py."""

import contextlib
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
from functools import partial
from http.client import HTTPConnection
from pathlib import Path

import decoders
import harness
import httpx
import numpy as np
import torch

from transformer_mt.choices import KERNELS
from transformer_mt.data.batching import Collator
from transformer_mt.decoding import BeamSearch, GreedySearch, PowerLength, SearchOptions
from transformer_mt.evaluation.metrics import corpus_scores
from transformer_mt.markdown import markdown_table
from transformer_mt.model.kernels import Kernels, default_cache
from transformer_mt.serving.sentences import Split

SETUP = ("batch", "length_penalty", "inter", "intra", "kernels", "ct2_inter", "ct2_intra")  # how all decode
SYSTEMS = ("ours float32", "ours int8", "CTranslate2 float32", "CTranslate2 int8")  # of --rounds, and their pairs
PAIRS = (("ours float32", "CTranslate2 float32"), ("ours int8", "CTranslate2 int8"), ("ours int8", "ours float32"))
SEARCHES = ("greedy", "beam 4")


def compare(args) -> dict:
    """The systems table per search (--only: those systems); printed, and returned for --json."""
    module, lines = decoders.loaded(args)
    refs = Path(args.reference).read_text(encoding="utf-8").splitlines()[: args.limit]
    src = module.tokenizer.encode_sources(lines)
    order = sorted(range(len(src)), key=lambda i: len(src[i]))  # the same length-sorted batches for all
    lines, refs, src = [lines[i] for i in order], [refs[i] for i in order], [src[i] for i in order]
    limited = SearchOptions(max_len_a=1.2, max_len_b=10)
    collate = Collator(module.pad_id, module.bos_id, module.eos_id)
    limits = limited.limits(module.models[0], collate.pad(src)).tolist()  # our searches'
    device, mine, rows = args.device, f"ours {decoders.NAMES[args.dtype]}", []
    chosen = Kernels(args.kernels, default_cache()) if device == "cpu" else None
    systems = decoders.our_systems(module.models[0], mine, device, args.dtype, chosen)
    systems = {name: model for name, model in systems.items() if args.only is None or name in args.only}
    workers = decoders.workers(args, device)
    with tempfile.TemporaryDirectory() as tmp, workers:
        kept, skipped = decoders.peers(module, Path(tmp), args, lines)
        for beams, search in ((1, GreedySearch(limited)), (4, BeamSearch(4, PowerLength(args.length_penalty),
                                                                          options=limited))):
            runs = {system: partial(decoders.ours, module, model, src, search, device, args.batch, workers)
                    for system, model in systems.items()}
            runs.update({peer: partial(translate, lines, beams) for peer, translate in kept})
            measured = harness.rounds({name: partial(harness.timed, run, device) for name, run in runs.items()},
                                      args.repeat)
            results = harness.best(measured, decoders.SECONDS)
            reference = results[mine][1] if mine in results else None
            for system, (seconds, ids) in results.items():
                ids = ids if system.startswith("ours") else [hyp[:limit] for hyp, limit in zip(ids, limits)]
                equal = None if reference is None else sum(a == b for a, b in zip(ids, reference))
                rows.append({"search": "beam 4" if beams > 1 else "greedy", "system": system, "seconds": seconds,
                             "sentences_per_s": len(lines) / seconds,
                             "bleu": corpus_scores(module.tokenizer.tgt.decode(ids), refs)["bleu"],
                             "tokens_per_s": sum(len(i) + 1 for i in ids) / seconds,  # target tokens, EOS included
                             "outputs_equal": equal, "sentences": len(lines)})
    if chosen is not None:
        print(chosen.describe())
    setup = decoders.describe(args, device, workers)
    print(f"{len(lines)} sentences, batches of {args.batch}, {setup}, {args.dtype}, best of "
          f"{args.repeat}; BLEU: sacreBLEU 13a, cased, detokenized\n")
    ratios = print_tables(rows, mine, [peer for peer, _ in kept], device)
    for peer, error in skipped.items():
        print(f"{peer}: not measured: {error}")
    return {"setup": setup, "sentences": len(lines), "systems": rows, "ratios": ratios, "skipped": skipped}


def print_tables(rows: list[dict], mine: str, peer_names: list[str], device: str) -> list[dict]:
    """The systems table, and each peer against ours (x > 1: ours is faster); the ratios."""
    print(markdown_table(["search", "system", "seconds", "sentences/s", "BLEU", f"outputs equal to {mine}"],
                         [[r["search"], r["system"], f"{r['seconds']:.2f}", f"{r['sentences_per_s']:.0f}",
                           f"{r['bleu']:.2f}", f"{r['outputs_equal']} / {r['sentences']}"] for r in rows],
                         right=(2, 3, 4, 5)))
    present = {r["system"] for r in rows}
    pairs = [(mine, peer) for peer in peer_names if peer != "CTranslate2 int8" and mine in present]
    if device == "cpu" and "CTranslate2 int8" in peer_names and "ours int8" in present:
        pairs.append(("ours int8", "CTranslate2 int8"))
    ratios = []
    for search in SEARCHES:
        t = {r["system"]: r["seconds"] for r in rows if r["search"] == search}
        ratios += [{"search": search, "ours": a, "peer": b, "ratio": t[b] / t[a]} for a, b in pairs]
    if pairs:
        print("\n" + markdown_table(["search", *(f"{a} vs {b}" for a, b in pairs)], [
            [search, *(f"{r['ratio']:.2f}x" for r in ratios if r["search"] == search)] for search in SEARCHES],
            right=range(1, 1 + len(pairs))) + "\n\n(x > 1: ours is faster)")
    return ratios


def in_rounds(args) -> None:
    """--rounds (and --load): each system alone in a fresh process (--script --only SYSTEM), in turns."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "one.json"

        def one(system: str, load: int = 0) -> dict:
            harness.in_process([sys.executable, str(args.script), "--ckpt", args.ckpt, "--source", args.source,
                                "--reference", args.reference, "--repeat", "1", "--only", system, "--json", str(out),
                                *args.setup, *(["--limit", str(args.limit)] if args.limit else [])], load)
            return {row["search"]: row for row in json.loads(out.read_text())["systems"]}

        measured = harness.rounds({s: lambda s=s: {"quiet": one(s), **({"loaded": one(s, args.load)} if args.load
                                                                       else {})} for s in SYSTEMS}, args.rounds,
                                  "decode_speed")
    quiet = [{s: m[s]["quiet"] for s in SYSTEMS} for m in measured]
    loaded = [{s: m[s]["loaded"] for s in SYSTEMS} for m in measured] if args.load else []
    result = {**harness.machine(), "setup": " ".join(args.setup), "rounds": quiet}
    text = [f"{harness.described(result)}; {args.rounds} rounds, one engine per process; {' '.join(args.setup)}"]
    columns = ["search", "ours", "peer", "median (x > 1: ours is faster)", "rounds", "BLEU ours / peer"]
    for name, rounds in (("ratios", quiet), ("loaded_ratios", loaded))[: 1 + bool(args.load)]:
        result[name] = [{**r, "ours": a, "peer": b, "bleu": (rounds[0][a][k]["bleu"], rounds[0][b][k]["bleu"])}
                        for a, b in PAIRS for k in SEARCHES  # peer / ours: x > 1, ours is faster
                        for r in harness.ratios(rounds, [(a, b)], lambda m, k=k: m[k]["seconds"], search=k)]
        text += ["", *([f"Beside {args.load} busy processes:", ""] if name == "loaded_ratios" else []), markdown_table(
            columns, [[r["search"], r["ours"], r["peer"], f"{r['median']:.2f}x", " / ".join(
                f"{x:.2f}" for x in r["rounds"]), "{:.2f} / {:.2f}".format(*r["bleu"])] for r in result[name]],
            right=(3,))]
    if args.load:
        result["loaded"] = loaded
        result["slowdowns"] = [{"system": s, **r} for s in SYSTEMS for search in SEARCHES for r in harness.ratios(
            [{"quiet": q[s], "loaded": b[s]} for q, b in zip(quiet, loaded)], [("quiet", "loaded")],
            lambda m, k=search: m[k]["seconds"], search=search)]
        text += ["", "Loaded / quiet time, each system (medians of the rounds):", "", markdown_table(
            ["search", *SYSTEMS], [[k, *(f"{r['median']:.2f}x" for r in result["slowdowns"] if r["search"] == k)]
                                   for k in SEARCHES], right=range(1, 1 + len(SYSTEMS)))]
    harness.save(result, args.json, "\n".join(text))


def asked(port: int, requests: list[tuple[dict, str]], at: list[float] | None, clients: int) -> list[tuple]:
    """Each request sent once, each answer's (seconds, status, mixed up): by `clients` threads one after another
    (closed loop), or with `at` each at its arrival second (open loop: up to `clients` in flight)."""
    local, began = threading.local(), time.monotonic()

    def one(i: int) -> tuple[float, int, bool]:
        if not hasattr(local, "http"):  # the standard library's client: light, kept alive
            local.http = HTTPConnection("127.0.0.1", port, timeout=120)
        if at is not None:  # its latency from its arrival, sent late or not (no coordinated omission)
            time.sleep(max(0.0, began + at[i] - time.monotonic()))
        start = time.monotonic() if at is None else began + at[i]
        local.http.request("POST", "/translate", body=json.dumps(requests[i][0]),
                           headers={"Content-Type": "application/json"})
        answer = local.http.getresponse()
        body = answer.read()
        return (time.monotonic() - start, answer.status,
                answer.status == 200 and json.loads(body)["translations"][0]["text"] != requests[i][1])

    out: list = [None] * len(requests)

    def client(k: int) -> None:  # closed loop: requests k, k + clients, ...; open: request k
        for i in range(k, len(requests), clients) if at is None else [k]:
            out[i] = one(i)

    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(client, range(clients if at is None else len(requests))))
    return out


def level(port: int, load: str, requests: list[tuple[dict, str, int]], rate: float, server: int, args) -> dict:
    """One level: `load` is `N` closed-loop clients or `R%` of the offline rate, Poisson arrivals; at most
    --requests requests and --seconds of arrivals; latencies, 503s, other errors, mix-ups and the server's PSS."""
    count, at, clients = args.requests, None, 256 if load.endswith("%") else int(load)  # open loop: 256 in flight
    if load.endswith("%"):
        per_request = rate * float(load[:-1]) / 100 / statistics.mean(n for *_, n in requests)  # requests a second
        at = [t for t in np.cumsum(np.random.default_rng(0).exponential(1 / per_request, count)).tolist()
              if t <= args.seconds]
        count = len(at)
    picked = [requests[i % len(requests)] for i in range(count)]
    seconds, done = harness.timed(lambda: asked(port, [(b, e) for b, e, _ in picked], at, clients))
    latencies = [t for t, status, _ in done if status == 200]
    return {"load": load, "requests": len(done), "sentences_per_s": sum(
                n for (_, status, _), (*_, n) in zip(done, picked) if status == 200) / seconds,
            "p50_ms": 1000 * statistics.median(latencies) if latencies else None,
            "p99_ms": 1000 * float(np.percentile(latencies, 99, method="inverted_cdf")) if latencies else None,
            "refused": sum(status == 503 for _, status, _ in done),
            "errors": sum(status not in (200, 503) for _, status, _ in done), "mixups": sum(m for *_, m in done),
            "seconds": seconds, "server_mib": pss_mib(server), "latencies_ms": [1000 * t for t in latencies]}


def pss_mib(pid: int) -> float | None:
    """The process's proportional set size in MiB (Linux; None elsewhere)."""
    with contextlib.suppress(OSError):
        return int(re.search(r"^Pss:\s+(\d+) kB", Path(f"/proc/{pid}/smaps_rollup").read_text(), re.M)[1]) / 1024
    return None


def loads(lines: list[str], paragraphs: bool) -> tuple[list[tuple[dict, list[str], int]], list[str]]:
    """The requests (body, its sentences, how they join) of one sentence each, or of paragraphs of 5-10 lines
    (split=true); and every sentence to translate offline."""
    if not paragraphs:
        return [({"text": line}, [line], None) for line in lines], lines
    sizes, out, start = np.random.default_rng(0).integers(5, 11, len(lines)).tolist(), [], 0
    for size in sizes:
        if start + size > len(lines):
            break
        split = Split.of([" ".join(lines[start:start + size])], "en")
        out.append(({"text": " ".join(lines[start:start + size]), "split": True}, split.sentences, split))
        start += size
    return out, [s for _, sentences, _ in out for s in sentences]


def serve(args) -> dict:
    """--what serve: task=translate on the sentences, then task=serve under each --clients and --rates level."""
    lines = [line for line in Path(args.source).read_text(encoding="utf-8").splitlines() if line.strip()]
    plan, sentences = loads(lines, args.paragraphs)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "in.txt").write_text("".join(f"{line}\n" for line in sentences), encoding="utf-8")
        _, rate = decoders.translate_process(args, Path(tmp) / "in.txt", Path(tmp) / "out.txt", Path(tmp) / "translate")
        offline = dict(zip(sentences, (Path(tmp) / "out.txt").read_text(encoding="utf-8").splitlines()))
        requests = [(body, split.joined([offline[s] for s in parts])[0] if split else offline[parts[0]], len(parts))
                    for body, parts, split in plan]
        with socket.socket() as sock:  # a free loopback port
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        process = subprocess.Popen([sys.executable, str(args.run_py), "task=serve", f"ckpt_path={args.ckpt}",
                                    f"task.port={port}", f"hydra.run.dir={tmp}/serve",
                                    "task.cache_lines=0", *args.overrides, *args.server],  # decoding, not the cache
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while True:  # until it answers /health
                with contextlib.suppress(httpx.TransportError):
                    if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                        break
                if process.poll() is not None:
                    raise SystemExit("the server did not start")
                time.sleep(0.2)
            levels = [level(port, load, requests, rate, process.pid, args) for load in
                      [*args.clients.split(","), *(f"{float(r) * 100:g}%" for r in args.rates.split(",") if r)]]
        finally:
            process.terminate()
            process.wait(timeout=60)
    alone = levels[0]["p50_ms"]
    kind = "paragraphs of 5-10 sentences (split)" if args.paragraphs else "one sentence a request"
    print(f"{harness.described(harness.machine())}; {kind}; offline task=translate: {rate:.1f} sentences/s\n")
    print(markdown_table(["load", "requests", "sentences/s", "x offline", "p50 ms", "p99 ms", "p99 / p50 alone",
                          "503s", "errors", "mix-ups", "server MiB"],
                         [[r["load"], r["requests"], f"{r['sentences_per_s']:.1f}",
                           f"{r['sentences_per_s'] / rate:.2f}", *(f"{r[k]:.0f}" if r[k] else "-" for k in (
                               "p50_ms", "p99_ms")), f"{r['p99_ms'] / alone:.1f}" if r["p99_ms"] else "-",
                           r["refused"], r["errors"], r["mixups"],
                           f"{r['server_mib']:.0f}" if r["server_mib"] else "-"] for r in levels],
                         right=tuple(range(1, 11))))
    return {"offline_sentences_per_s": rate, "paragraphs": args.paragraphs, "levels": levels}


def arguments():
    parser = harness.parser(__doc__, device="cpu")
    add = parser.add_argument
    add("--what", choices=["systems", "cache", "ensemble", "shortlist", "serve", "models"], default="systems")
    add("--ckpt", default=str(harness.SHIPPED))
    add("--versus", help="models: the checkpoint timed against --ckpt")
    add("--source", help="source sentences, one per line (default: made-up English ones)")
    add("--reference", help="references, one per line (systems, shortlist, models)")
    add("--limit", type=int, help="only the first N sentences (made-up ones: default 500)")
    add("--repeat", type=int, default=3, help="rounds in this process (the systems take turns); the best time counts")
    add("--rounds", type=int, help="each system alone in a fresh process, this many rounds (shortlist, models: 3)")
    add("--load", type=int, default=0, help="--rounds: each system again beside N busy processes")
    add("--script", type=Path, default=Path(__file__), help="--rounds: the script each process runs (default: this)")
    add("--dtype", choices=tuple(decoders.NAMES), default="fp32", help="ours (cast), HF and CTranslate2")
    add("--only", nargs="+", help="measure these systems alone (e.g. 'ours int8', 'CTranslate2 int8')")
    add("--batch", type=int, default=64, help="sentences a batch")
    add("--length-penalty", type=float, default=0.6, help="beam search's (CTranslate2's setup: 0)")
    add("--inter", type=int, help="ours: decoders at once (inter_threads; default: one per core)")
    add("--intra", type=int, help="ours: threads a decoder (intra_threads; default: the rest)")
    add("--kernels", choices=KERNELS, default="auto", help="ours: model/kernels.py")
    add("--ct2-inter", type=int, default=1, help="CTranslate2's inter_threads")
    add("--ct2-intra", type=int, default=decoders.THREADS, help="CTranslate2's intra_threads")
    add("--shortlist", choices=["none", "versus", "both"], default="none", help="models: whose lexical table decodes")
    add("--candidates", type=int, default=30, help="shortlist, models: task=shortlist's K")
    add("--frequent", type=int, default=300, help="shortlist: task=shortlist's F")
    add("--scoring", default="probability", help="shortlist: task=shortlist's scoring")
    add("--clients", default="1,4,16,64", help="serve: closed-loop levels, the concurrent clients of each")
    add("--rates", default="", help="serve: open-loop levels, Poisson arrivals at these fractions of the offline rate")
    add("--paragraphs", action="store_true", help="serve: requests of 5-10 sentences (split=true), not one")
    add("--requests", type=int, default=400, help="serve: requests per level, at most")
    add("--seconds", type=float, default=60, help="serve: an open-loop level's arrivals, at most these seconds")
    add("--server", nargs="*", default=[], help="serve: the server's own overrides (task.max_queue=64)")
    add("--run-py", type=Path, default=harness.ROOT / "run.py", help="shortlist, serve, models: another run.py")
    add("overrides", nargs="*", help="shortlist, serve, models: more run.py overrides (after --)")
    args = parser.parse_args()
    args.setup = [f"--{name.replace('_', '-')}={getattr(args, name)}" for name in SETUP  # the options given
                  if getattr(args, name) != parser.get_default(name)]
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no GPU")
    needed = {"systems": ["source", "reference"], "shortlist": ["source", "reference"], "serve": ["source"],
              "models": ["source", "reference", "versus"]}
    if not all(getattr(args, name) for name in needed.get(args.what, [])):
        parser.error(f"--what {args.what} needs --{' and --'.join(needed[args.what])}")
    return args


def main() -> None:
    args = arguments()
    torch.set_num_threads(decoders.THREADS)
    if args.rounds and args.what == "systems":
        in_rounds(args)
        return
    modes = {"systems": compare, "cache": decoders.cache_tables, "ensemble": decoders.ensemble,
             "shortlist": decoders.shortlist, "serve": serve, "models": decoders.models}
    figures = modes[args.what](args)
    harness.save({**harness.machine(args.device), "checkpoint": args.ckpt, **{k: getattr(args, k) for k in (
        "source", "device", "dtype", "repeat", "batch", "length_penalty")}, **figures}, args.json)


if __name__ == "__main__":
    main()
