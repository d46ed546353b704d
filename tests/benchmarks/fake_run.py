"""A stand-in for run.py in the benchmarks' tests (decode_speed.py --what shortlist and --what serve take
it as --run-py): task=shortlist, task=translate and task=serve, at once and with known figures.

Each call appends its key=value arguments to $FAKE_CALLS (a JSON line). task=translate writes
task.output: each input line as `<line>`, and logs "translated N lines in S s (R lines/s)" to
stderr and to hydra.run.dir/run.log; S is $FAKE_SECONDS[variant][r] for the r-th translation of a
variant ("fp32", "int8 shortlist", ...: quantize and decoding.shortlist), else 0.5. task=serve
answers /health, and POST /translate with `<text>` (split=true: `<sentence>` for each sentence, joined
as the server joins them), but a 500 for the text "error", a 503 for "busy" and a wrong translation for
"mixup", until it is stopped."""

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from transformer_mt.serving.sentences import Split


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # kept alive, as the benchmark's clients keep theirs

    def answer(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.answer(200, {"status": "ok"})

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        text = body["text"]
        if text in ("error", "busy"):
            self.answer(500 if text == "error" else 503, {"error": "made to fail"})
        elif body.get("split"):
            split = Split.of([text], "en")
            self.answer(200, {"translations": [{"text": split.joined([f"<{s}>" for s in split.sentences])[0]}]})
        else:
            self.answer(200, {"translations": [{"text": "wrong" if text == "mixup" else f"<{text}>"}]})

    def log_message(self, *args) -> None:
        pass


def translate(given: dict, earlier: list[dict]) -> None:
    variant = ("int8" if given.get("quantize") == "int8" else "fp32") + (
        " shortlist" if given.get("decoding.shortlist") == "true" else "")
    same = sum(e.get("task") == "translate" and e.get("quantize") == given.get("quantize")
               and e.get("decoding.shortlist") == given.get("decoding.shortlist") for e in earlier)
    seconds = json.loads(os.environ.get("FAKE_SECONDS", "{}")).get(variant, [0.5] * (same + 1))[same]
    lines = Path(given["task.input"]).read_text(encoding="utf-8").splitlines()
    Path(given["task.output"]).write_text("".join(f"<{line}>\n" for line in lines), encoding="utf-8")
    message = f"translated {len(lines)} lines in {seconds} s ({len(lines) / seconds:.1f} lines/s)"
    run_dir = Path(given["hydra.run.dir"])
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "run.log").write_text(f"[..][transformer_mt.tasks.translate][INFO] - {message}\n", encoding="utf-8")
    print(message, file=sys.stderr)


def main() -> None:
    given = dict(arg.split("=", 1) for arg in sys.argv[1:] if "=" in arg)
    calls = Path(os.environ["FAKE_CALLS"])
    earlier = [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []
    with calls.open("a") as out:
        out.write(json.dumps(given) + "\n")
    if given["task"] == "translate":
        translate(given, earlier)
    elif given["task"] == "serve":
        ThreadingHTTPServer(("127.0.0.1", int(given["task.port"])), Handler).serve_forever()


if __name__ == "__main__":
    main()
