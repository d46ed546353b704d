"""task=serve as a user runs it: `python run.py task=serve ...` on a free port, with concurrent
clients. Each request gets what task=translate gives for its lines and options (greedy and beam,
under concurrency, requests batched together); a bad request is a 4xx naming the field and the server
goes on; split=true translates a text sentence by sentence; /metrics counts what was answered; lines
decoded before come from the cache; the LibreTranslate mount and /v1/translations answer as their
clients expect; CTranslate2 serves behind it as task=translate's engine does; a full queue is a 503
with Retry-After; an API key guards every route but /health; SIGTERM finishes the request in flight
and exits 143; a model that cannot load stops the server at start in one line; the page translates
in a real headless browser."""

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import ROOT, compose_config, not_our_checkpoint, python, run_py
from transformer_mt.tasks import run

SHIPPED = ROOT / "experiments" / "multi30k" / "multi30k_en_de.ckpt"
# the tests marked cli check statuses, messages and counts: make test-portable does not run them again
SUBJECTS = ["A man", "Two dogs", "A little girl", "A woman in a red coat", "Three boys", "An old man with a hat"]
ACTIONS = ["is riding a bicycle down the street.", "are playing in the snow.", "is sitting on a bench.",
           "walks past a shop with a large window.", "are jumping into a lake.", "is cooking in a kitchen."]
LINES = [f"{s} {a}" for s in SUBJECTS for a in ACTIONS][:32]
BEAM = ["decoding=beam"]  # the server's decoding: its options (length limits) every request's search runs with
DECODERS = ["inter_threads=2", "intra_threads=1"]  # two batches decoded at once, whatever the machine's cores


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """`python run.py task=serve ARGS` on a free port, up once GET /health answers (forked from this
    worker's warm server where it can be: tests/warm_start.py)."""

    def __init__(self, folder: Path, *args: str, env: dict | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, **(env or {}), "PYTHONWARNINGS": "ignore"}
        self.process = subprocess.Popen(
            [python(env), str(ROOT / "run.py"), "task=serve", f"task.port={self.port}", f"hydra.run.dir={folder}",
             *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.2)
        raise AssertionError(f"the server did not start: {self.stop()[1][-2000:]}")

    def post(self, body: dict, **kwargs) -> httpx.Response:
        return httpx.post(f"{self.url}/translate", json=body, timeout=120, **kwargs)

    def stop(self, sig: int = signal.SIGTERM) -> tuple[int, str]:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        _, err = self.process.communicate(timeout=60)
        return self.process.returncode, err


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("serve")
    served = Server(folder / "run", f"ckpt_path={SHIPPED}", *BEAM, "task.max_wait_ms=50", *DECODERS)
    yield served
    served.stop()


def offline(tmp_path: Path, name: str, lines: list[str], decoding: list[str]) -> list[str]:
    """What task=translate writes for `lines` with `decoding` (the shipped model)."""
    (tmp_path / f"{name}.in").write_text("".join(f"{line}\n" for line in lines))
    run(compose_config(tmp_path / name, ["task=translate", f"ckpt_path={SHIPPED}", f"task.input={tmp_path}/{name}.in",
                                         f"task.output={tmp_path}/{name}.out", *decoding]))
    return (tmp_path / f"{name}.out").read_text().splitlines()


def test_concurrent_requests_get_what_task_translate_gives(server, tmp_path):
    greedy = offline(tmp_path, "greedy", LINES, ["decoding=greedy", "decoding.options.max_len_a=1.0",
                                                 "decoding.options.max_len_b=50"])  # beam's options
    beam = offline(tmp_path, "beam", LINES, ["decoding=beam", "decoding.beam_size=3"])
    requests = [({"text": LINES[i : i + 2], "search": "greedy"}, greedy[i : i + 2]) for i in range(0, 32, 2)]
    requests += [({"text": LINES[i], "beam_size": 3}, beam[i : i + 1]) for i in range(32)]
    with ThreadPoolExecutor(16) as clients:
        answers = list(clients.map(lambda request: server.post(request[0]), requests))
    assert all(a.status_code == 200 for a in answers)
    got = [[t["text"] for t in a.json()["translations"]] for a in answers]
    assert got == [expected for _, expected in requests]  # none lost, none mixed up, each as offline
    assert len(set(greedy)) > 16 and len(set(beam)) > 16  # the lines differ: a mix-up would show


def test_int8_answers_are_task_translates_whatever_the_batch(tmp_path_factory, tmp_path):
    """int8 scales each row on its own: one-line requests from 16 clients, batched as they come and
    decoded two batches at once, get exactly what task=translate writes decoding all the lines at
    once (greedy and beam). The server decodes greedy requests in running batches
    (task.continuous_batching=true): lines of two words to a long compound sentence join them as rows
    end, each still task=translate's; beam requests batch as before."""
    lines = [*LINES, "A dog.", "Two men.", "Look!", " ".join(LINES[:4]), " and ".join(LINES[4:7])]
    greedy = offline(tmp_path, "greedy", lines, ["decoding=greedy", "decoding.options.max_len_a=1.0",
                                                 "decoding.options.max_len_b=50", "quantize=int8"])
    beam = offline(tmp_path, "beam", LINES, ["decoding=beam", "decoding.beam_size=3", "quantize=int8"])
    served = Server(tmp_path_factory.mktemp("serve_int8") / "run", f"ckpt_path={SHIPPED}", *BEAM, "quantize=int8",
                    "task.max_wait_ms=20", "task.continuous_batching=true", *DECODERS)
    try:
        requests = [({"text": line, "search": "greedy"}, [out]) for line, out in zip(lines, greedy)]
        requests += [({"text": line, "beam_size": 3}, [out]) for line, out in zip(LINES, beam)]
        with ThreadPoolExecutor(16) as clients:
            answers = list(clients.map(lambda request: served.post(request[0]), requests))
    finally:
        status, err = served.stop()
    assert all(a.status_code == 200 for a in answers)
    assert [[t["text"] for t in a.json()["translations"]] for a in answers] == [out for _, out in requests]
    assert status == 143 and "2 decoders" in err, err[-2000:]
    assert max(map(len, greedy)) > 8 * min(map(len, greedy))  # lengths far apart


def test_ctranslate2_behind_the_server_answers_what_task_translate_gives_with_it(tmp_path_factory, tmp_path):
    """task.engine=ctranslate2: 16 clients' greedy and beam requests, decoded two batches at once by
    CTranslate2's replicas, get what task=translate task.engine=ctranslate2 writes; constraints and
    alignments, which CTranslate2 cannot give, are a 422 naming the field."""
    engine = ["task.engine=ctranslate2", f"task.ct2_dir={tmp_path}/ct2"]
    greedy = offline(tmp_path, "greedy", LINES, ["decoding=greedy", "decoding.options.max_len_a=1.0",
                                                 "decoding.options.max_len_b=50", *engine])
    beam = offline(tmp_path, "beam", LINES, ["decoding=beam", "decoding.beam_size=3", *engine])
    served = Server(tmp_path_factory.mktemp("serve_ct2") / "run", f"ckpt_path={SHIPPED}", *BEAM, *engine, *DECODERS)
    try:
        assert httpx.get(f"{served.url}/models").json()["models"][0]["engine"] == "ctranslate2"
        requests = [({"text": line, "search": "greedy"}, [out]) for line, out in zip(LINES, greedy)]
        requests += [({"text": line, "beam_size": 3}, [out]) for line, out in zip(LINES, beam)]
        with ThreadPoolExecutor(16) as clients:
            answers = list(clients.map(lambda request: served.post(request[0]), requests))
        refused = [served.post({"text": "A dog.", "constraints": ["Hund"]}),
                   served.post({"text": "A dog.", "alignments": True})]
    finally:
        status, err = served.stop()
    assert [[t["text"] for t in a.json()["translations"]] for a in answers] == [out for _, out in requests]
    assert [(a.status_code, a.json()["field"]) for a in refused] == [(422, "constraints"), (422, "alignments")]
    assert "CTranslate2" in refused[0].json()["error"] and status == 143, err[-2000:]


def test_options_scores_nbest_alignments_and_a_prefix(server):
    answer = server.post({"text": LINES[:2], "beam_size": 4, "nbest": 3, "scores": True, "alignments": True}).json()
    for line in answer["translations"]:
        scores = [h["score"] for h in line["nbest"]]
        assert len(scores) == 3 and scores == sorted(scores, reverse=True) and line["score"] == scores[0]
        assert line["alignment"] and all("-" in pair for pair in line["alignment"].split())
        assert "off_target" not in line  # one target language: no flag
    prefixed = server.post({"text": LINES[0], "prefix": "Ein Junge"}).json()["translations"][0]["text"]
    assert prefixed.startswith("Ein Junge")


def test_constraints_are_in_every_translation(server, tmp_path):
    body = {"text": [LINES[0], LINES[7]], "constraints": [["Rad"], ["Tiere", "Schnee"]], "nbest": 2}
    lines = server.post(body).json()["translations"]
    assert all(all(p in h["text"] for p in phrases) for line, phrases in zip(lines, body["constraints"])
               for h in line["nbest"])
    (tmp_path / "in.txt").write_text(f"{LINES[0]}\tRad\n")
    run(compose_config(tmp_path / "run", ["task=translate", f"ckpt_path={SHIPPED}", f"task.input={tmp_path}/in.txt",
                                          f"task.output={tmp_path}/out.txt", *BEAM, "decoding.constraints=true"]))
    assert server.post({"text": LINES[0], "constraints": ["Rad"]}).json()["translations"][0]["text"] == \
        (tmp_path / "out.txt").read_text().strip()  # as task=translate gives it


@pytest.mark.cli
@pytest.mark.parametrize(("body", "status", "field", "words"), [
    ({"text": "a cat", "search": "greedy", "constraints": ["Katze"]}, 422, "constraints", "need beam search"),
    ({"text": ["a cat", "a dog"], "constraints": [["Katze"]]}, 422, "constraints", "1 lists of phrases for 2 lines"),
    ({"text": "a cat", "constraints": [" "]}, 422, "constraints", "an empty phrase"),
    ({"text": "a cat", "beem": 4}, 422, "beem", "no such field"),
    ({"lines": ["a cat"]}, 422, "text", "required"),
    ({"text": ["a cat"] * 65}, 422, "text", "the 64 a request may send (task.max_lines)"),
    ({"text": "a " * 6000}, 422, "text", "task.max_chars"),
    ({"text": "a cat", "beam_size": 17}, 422, "beam_size", "the 16 the server allows (task.max_beam)"),
    ({"text": "a cat", "beam_size": 0}, 422, "beam_size", "greater than or equal to 1"),
    ({"text": "a cat", "nbest": 5, "beam_size": 4}, 422, "nbest", "more than beam_size=4"),
    ({"text": "a cat", "model": "../etc/passwd"}, 404, "model", "no such model; the models: default"),
    ({"text": "a cat", "tag": "bt"}, 422, "tag", "the vocabulary has no token <bt>"),
    ({"text": "a cat " * 300}, 422, "text", "text[0]: 601 tokens, more than the model's max_positions=512"),
])
def test_a_bad_request_is_a_4xx_naming_the_field_and_the_server_goes_on(server, body, status, field, words):
    answer = server.post(body)
    assert answer.status_code == status and answer.json()["field"] == field and words in answer.json()["error"]
    assert server.post({"text": "A dog runs."}).status_code == 200


JSON = "application/json"
SEND = 'send a JSON object, {"text": ...}'


@pytest.mark.cli
@pytest.mark.parametrize(("body", "kind", "status", "error"), [
    (b'{"text": "Ein Caf\xe9."}', JSON, 400, "the body is not UTF-8: byte 0xe9 at offset 17"),  # Latin-1
    (b'{"text": "A dog."}\xff', JSON, 400, "the body is not UTF-8: byte 0xff at offset 18"),
    (b'{"text": "A dog." "beam_size": 4}', JSON, 400,
     "invalid JSON: Expecting ',' delimiter at line 1, column 19 (character 18)"),
    (b'{\n  "text": "A dog.",\n}', JSON, 400,
     "invalid JSON: Expecting property name enclosed in double quotes at line 3, column 1 (character 22)"),
    (b'["A dog."]', JSON, 422, f"the body is an array, not a JSON object: {SEND}"),
    (b'"A dog."', JSON, 422, f"the body is a string, not a JSON object: {SEND}"),
    (b"", JSON, 422, f"the body is empty: {SEND}"),
    (b'{"text": "A dog."}', "application/x-www-form-urlencoded", 415, "the body is not sent as JSON (Content-Type: "
     "application/x-www-form-urlencoded): send it as Content-Type: application/json"),  # curl -d without -H
], ids=["latin-1", "trailing-byte", "json", "json-lines", "array", "string", "empty", "form"])
def test_a_bad_body_is_the_documented_error_and_the_server_goes_on(server, body, kind, status, error):
    answer = httpx.post(f"{server.url}/translate", content=body, headers={"Content-Type": kind}, timeout=60)
    assert (answer.status_code, answer.json()) == (status, {"error": error, "field": "body"})
    good = server.post({"text": "A dog runs."})
    assert good.status_code == 200 and good.json()["translations"][0]["text"].startswith("Ein Hund")


@pytest.mark.cli
def test_invalid_json_is_a_400_and_the_models_and_schema_are_listed(server):
    answer = httpx.post(f"{server.url}/translate", content=b"{not json", headers={"Content-Type": "application/json"})
    assert answer.status_code == 400 and answer.json()["error"].startswith("invalid JSON")
    info = httpx.get(f"{server.url}/models").json()["models"]
    assert [m["name"] for m in info] == ["default"] and info[0]["vocabulary"]["source"] == 10000
    assert info[0]["decoding"] == {"search": "BeamSearch", "beam_size": 4, "nbest": 1, "length_penalty": 0.6}
    assert "/translate" in httpx.get(f"{server.url}/openapi.json").json()["paths"]


def scraped(url: str) -> dict[tuple, float]:
    """GET /metrics, each sample by (name, its labels as sorted pairs), read with prometheus_client's parser."""
    answer = httpx.get(f"{url}/metrics")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain; version=")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(answer.text) for s in family.samples}


OK = ("transformer_mt_requests_total", (("route", "/translate"), ("status", "200")))
DECODED = ("transformer_mt_sentences_total", (("model", "default"),))
CACHED = ("transformer_mt_cached_lines_total", (("model", "default"),))


@pytest.mark.cli
def test_metrics_count_the_requests_lines_and_batches_the_server_answered(server):
    """/metrics in Prometheus' format, read before and after three requests of two lines no request
    sent before: each count moved by what was sent (the module's server, one test at a time here)."""
    seen = ("transformer_mt_request_seconds_count", (("route", "/translate"),))
    batches, decoding = ("transformer_mt_batch_fill_count", ()), ("transformer_mt_decode_seconds_total", ())
    before = scraped(server.url)
    assert before[("transformer_mt_queue_lines", (("model", "default"),))] == 0
    for i in range(3):
        fresh = [f"{line} Metrics {i}." for line in LINES[2 * i : 2 * i + 2]]
        assert server.post({"text": fresh}).status_code == 200
    after = scraped(server.url)
    assert after[OK] - before.get(OK, 0) == 3 and after[seen] - before.get(seen, 0) == 3
    assert after[DECODED] - before[DECODED] == 6 and after[CACHED] == before[CACHED]
    assert after[batches] - before[batches] == 3 and after[decoding] > before[decoding]


def test_lines_decoded_before_are_answered_from_the_cache_as_decoded(server):
    """A request sent again is answered from the translation cache (no line decoded), exactly as
    the first time; a request with one line known and one new decodes the new one alone."""
    request = {"text": [f"{line} Cached." for line in LINES[:3]], "beam_size": 3, "nbest": 2, "scores": True}
    first = server.post(request)
    before = scraped(server.url)
    again = server.post(request)
    middle = scraped(server.url)
    mixed = server.post({**request, "text": [request["text"][1], "A dog runs home. Cached."]})
    after = scraped(server.url)
    assert first.status_code == again.status_code == mixed.status_code == 200
    assert again.json() == first.json() and mixed.json()["translations"][0] == first.json()["translations"][1]
    assert (middle[CACHED] - before[CACHED], middle[DECODED] - before[DECODED]) == (3, 0)
    assert (after[CACHED] - middle[CACHED], after[DECODED] - middle[DECODED]) == (1, 1)
    other = server.post({**request, "beam_size": 4})  # another search: not the cached lines
    assert other.status_code == 200 and scraped(server.url)[DECODED] - after[DECODED] == 3


def test_split_translates_each_sentence_as_a_line_and_keeps_the_texts_whitespace(server):
    """split=true: a paragraph's sentences (sentencex, English rules) each translated as /translate
    translates it as a line, put back with the paragraph's spaces and line breaks; what split cannot
    give back (n-best, scores, alignments) is a 422 naming split."""
    sentences = LINES[4:8]
    paragraph = f"{sentences[0]}  {sentences[1]}\n{sentences[2]} {sentences[3]}"
    alone = [t["text"] for t in server.post({"text": sentences}).json()["translations"]]
    split = server.post({"text": [paragraph, sentences[0]], "split": True})
    assert split.status_code == 200
    assert [t["text"] for t in split.json()["translations"]] == [f"{alone[0]}  {alone[1]}\n{alone[2]} {alone[3]}",
                                                                 alone[0]]
    long = server.post({"text": f"{sentences[0]} " + " ".join(f"a cat number {i}" for i in range(400)), "split": True})
    assert long.status_code == 200 and long.json()["translations"][0]["text"].startswith(alone[0])
    assert long.json()["notes"] == ["text[0]: 1 sentence longer than the model's max_positions=512 allows, cut "
                                    "between words and translated piece by piece"]
    assert "notes" not in split.json()
    refused = server.post({"text": paragraph, "split": True, "nbest": 2, "beam_size": 4})
    assert refused.status_code == 422 and refused.json()["field"] == "split"
    libre = httpx.post(f"{server.url}/libretranslate/translate", json={"q": paragraph, "source": "en", "target": "de"})
    assert libre.json() == {"translatedText": split.json()["translations"][0]["text"]}


def test_the_libretranslate_mount_answers_as_libretranslate_does(server):
    """With /libretranslate as a LibreTranslate client's base URL, the request shapes of its API docs
    (JSON and a form; q a text or a list; source auto; alternatives) get its answers, the
    translations being POST /translate's; a bad request is a 400 with LibreTranslate's {"error": ...}."""
    base = f"{server.url}/libretranslate"
    assert httpx.get(f"{base}/languages").json() == [{"code": "en", "name": "English", "targets": ["de"]}]
    ours = [t["text"] for t in server.post({"text": LINES[:2]}).json()["translations"]]
    one = httpx.post(f"{base}/translate", json={"q": LINES[0], "source": "en", "target": "de", "format": "text"})
    assert one.status_code == 200 and one.json() == {"translatedText": ours[0]}
    form = httpx.post(f"{base}/translate", data={"q": LINES[0], "source": "auto", "target": "de"})
    assert form.json() == {"translatedText": ours[0], "detectedLanguage": {"confidence": 100.0, "language": "en"}}
    listed = httpx.post(f"{base}/translate", json={"q": LINES[:2], "source": "en", "target": "de",
                                                   "alternatives": 2}).json()
    nbest = server.post({"text": LINES[:2], "beam_size": 4, "nbest": 3}).json()["translations"]
    assert listed == {"translatedText": [t["text"] for t in nbest],
                      "alternatives": [[n["text"] for n in t["nbest"][1:]] for t in nbest]}
    for body, error in (({"source": "en", "target": "de"}, "Invalid request: missing q parameter"),
                        ({"q": "a", "source": "en", "target": "fr"}, "target=fr: no served model translates into "
                                                                     "it (the directions: en-de)"),
                        ({"q": "a", "source": "en", "target": "de", "format": "html"}, "format=html: only text is "
                                                                                       "translated here")):
        answer = httpx.post(f"{base}/translate", json=body)
        assert answer.status_code == 400 and answer.json() == {"error": error}


def test_v1_translations_takes_languages_and_gives_translate_s_text(server):
    ours = server.post({"text": LINES[3]}).json()["translations"][0]["text"]
    answer = httpx.post(f"{server.url}/v1/translations", json={"text": LINES[3], "target_language": "de"})
    assert answer.status_code == 200 and answer.json() == {"model": "default", "text": ours, "source_language": "en",
                                                           "target_language": "de"}
    refused = httpx.post(f"{server.url}/v1/translations", json={"text": "a", "target_language": "fr"})
    assert refused.status_code == 400 and refused.json()["field"] == "target_language"


@pytest.mark.cli
def test_a_full_queue_answers_503_with_retry_after_and_the_server_goes_on(tmp_path):
    """task.max_queue=1 with requests waiting 2 s for others: a second request while the first waits
    is a 503 naming the model, with Retry-After; the first is answered, and so is a request after."""
    served = Server(tmp_path / "run", f"ckpt_path={SHIPPED}", "task.max_queue=1", "task.max_wait_ms=2000")
    try:
        with ThreadPoolExecutor(1) as client:
            first = client.submit(served.post, {"text": LINES[0]})
            time.sleep(0.3)  # the first waits in the queue for others
            refused = served.post({"text": LINES[1]})
            assert first.result().status_code == 200
        assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
        assert refused.json() == {"error": "model=default: 1 lines are waiting to be decoded, the 1 the server "
                                           "queues (task.max_queue); retry after 1 s", "field": "model"}
        assert served.post({"text": LINES[2]}).status_code == 200
        assert scraped(served.url)[("transformer_mt_requests_total", (("route", "/translate"), ("status", "503")))] == 1
    finally:
        status, err = served.stop()
    assert status == 143, err[-2000:]


SERVING_DOC = ROOT / "docs" / "serving.md"
DOCUMENTED_SERVER = "python run.py task=serve ckpt_path=experiments/multi30k/multi30k_en_de.ckpt decoding=beam"
EXAMPLE = re.compile(r"```bash\n(curl [^\n]*/translate[^\n]*)\n```\s*```json\n(.*?)\n```", re.DOTALL)


def documented_examples() -> list[tuple[dict, object]]:
    """docs/serving.md's example requests to POST /translate (a curl command's -d) and the answer
    shown after each, its numbers kept as the page writes them (strings)."""
    found = []
    for command, answer in EXAMPLE.findall(SERVING_DOC.read_text(encoding="utf-8")):
        words = shlex.split(command)
        found.append((json.loads(words[words.index("-d") + 1]), json.loads(answer, parse_float=str)))
    return found


def as_shown(got: object, shown: object) -> object:
    """`got` with each number rounded to the decimals `shown` writes it with (where `shown` has one)."""
    if isinstance(shown, str) and isinstance(got, float):
        return f"{got:.{len(shown.partition('.')[2])}f}"
    if isinstance(shown, dict) and isinstance(got, dict):
        return {k: as_shown(v, shown.get(k)) for k, v in got.items()}
    if isinstance(shown, list) and isinstance(got, list) and len(got) == len(shown):
        return [as_shown(g, w) for g, w in zip(got, shown, strict=True)]
    return got


def test_the_documented_example_answers_are_the_shipped_models(server):
    """The server of this module is the page's (the shipped model, decoding=beam): each example
    request of docs/serving.md gets exactly the answer shown, its scores to the decimals shown."""
    examples = documented_examples()
    assert examples and DOCUMENTED_SERVER in SERVING_DOC.read_text(encoding="utf-8")
    for request, shown in examples:
        answer = server.post(request)
        assert answer.status_code == 200 and as_shown(answer.json(), shown) == shown, (request, answer.text)


@pytest.mark.cli
def test_an_api_key_guards_every_route_but_health_and_sigterm_finishes_the_request_in_flight(tmp_path):
    served = Server(tmp_path / "run", f"task.models={{one: {SHIPPED}, two: [{SHIPPED},{SHIPPED}]}}",
                    env={"TRANSFORMER_MT_API_KEY": "s3cret"})
    assert httpx.get(f"{served.url}/health").status_code == 200
    assert httpx.get(f"{served.url}/models").status_code == 401 and served.post({"text": "a"}).status_code == 401
    key = {"headers": {"X-API-Key": "s3cret"}}
    models = httpx.get(f"{served.url}/models", **key).json()["models"]
    assert [(m["name"], m["members"]) for m in models] == [("one", 1), ("two", 2)]
    libre = f"{served.url}/libretranslate"  # LibreTranslate's way: the key in the body; its languages open
    assert httpx.get(f"{libre}/languages").status_code == 200
    asked = {"q": "A dog.", "source": "en", "target": "de"}
    refused = httpx.post(f"{libre}/translate", json=asked)
    assert refused.status_code == 403 and refused.json() == {"error": "Invalid API key"}
    assert httpx.post(f"{libre}/translate", json={**asked, "api_key": "s3cret"}).status_code == 200
    assert httpx.post(f"{served.url}/v1/translations", json={"text": "a", "target_language": "de"}).status_code == 401
    with ThreadPoolExecutor(1) as client:
        slow = client.submit(served.post, {"text": LINES, "model": "two", "beam_size": 8}, **key)
        time.sleep(1.0)  # the request is in flight: the ensemble decodes 32 lines with beam 8
        status, err = served.stop(signal.SIGTERM)
        assert slow.result().status_code == 200 and len(slow.result().json()["translations"]) == 32
    assert status == 143 and "Traceback" not in err
    assert err.strip().splitlines()[-1] == "stopped by SIGTERM: translation requests answered: 2, the last in " \
                                           "flight included"  # LibreTranslate's, and the one in flight


@pytest.mark.cli
def test_with_max_loaded_models_load_on_first_use_the_least_recently_used_unloaded(tmp_path):
    """task.max_loaded=2 over three models: none loaded at start (GET /models lists them, with
    their directions), each loaded by its first request, the least recently used unloaded for a
    third; every answer is the model's, and /metrics counts the loads."""
    served = Server(tmp_path / "run", f"task.models={{a: {SHIPPED}, b: {SHIPPED}, c: {SHIPPED}}}", "task.max_loaded=2",
                    "decoding=greedy")
    try:
        before = httpx.get(f"{served.url}/models").json()["models"]
        texts = {name: served.post({"text": LINES[:2], "model": name}).json()["translations"]
                 for name in ("a", "b", "a", "c", "b")}
        after = httpx.get(f"{served.url}/models").json()["models"]
        loads = scraped(served.url)
    finally:
        status, err = served.stop()
    assert [(m["name"], m["loaded"], m["directions"]) for m in before] == [(n, False, ["en-de"]) for n in "abc"]
    assert texts["a"] == texts["b"] == texts["c"] and texts["a"][0]["text"].startswith("Ein Mann")
    assert [(m["name"], m["loaded"]) for m in after] == [("a", False), ("b", True), ("c", True)]
    assert {name: loads[("transformer_mt_model_loads_total", (("model", name),))] for name in "abc"} == \
        {"a": 1, "b": 2, "c": 1}
    assert status == 143 and "serving a, b, c (loaded on first use, at most 2 at once)" in err, err[-2000:]


@pytest.mark.cli
def test_a_model_that_cannot_load_stops_the_server_at_start_in_one_line(tmp_path):
    bad = not_our_checkpoint(tmp_path / "bad.ckpt")
    result = run_py("task=serve", f"task.models={{good: {SHIPPED}, bad: {bad}}}", f"hydra.run.dir={tmp_path}/run",
                    timeout=120)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith(f"error: ckpt_path={bad}: not a transformer-mt checkpoint")


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (.ci/run installs Debian's chromium)")
def test_the_page_translates_and_draws_the_alignment_in_a_browser(server):
    playwright = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (make install)")
    artifacts = ROOT / "outputs" / "test_artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page()
        page.goto(server.url + "/")
        page.wait_for_selector("#model option", state="attached")
        page.fill("#source", "Two dogs are playing in the snow.")
        page.click("#go")
        page.wait_for_function("document.getElementById('heatmap').dataset.drawn !== undefined", timeout=60000)
        translation = page.inner_text("#translation")
        drawn = int(page.get_attribute("#heatmap", "data-drawn"))
        rows = page.locator("#nbest-list tr").count()
        page.screenshot(path=str(artifacts / "serve_page.png"))
        browser.close()
    expected = server.post({"text": "Two dogs are playing in the snow.", "beam_size": 4}).json()
    assert translation == expected["translations"][0]["text"] and drawn > 0 and rows == 4
