"""task=translate: files and pipes, order and empty lines kept, n-best with scores, interactive."""

import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import ROOT, compose_config, python, run_py
from transformer_mt.data.toy import ToyCorpus
from transformer_mt.errors import DataError, find_user_error
from transformer_mt.tasks import run

pytestmark = pytest.mark.slow


def test_file_in_file_out_matches_the_test_translations(toy_run, tmp_path, caplog):
    out, _ = toy_run
    sources = ToyCorpus().load("test").src
    lines = sources[:40] + [""] + ["  " + sources[40] + "   "] + [""] + sources[41:300]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n")
    overrides = ["task=translate", f"ckpt_path={out}/checkpoints/best.ckpt", f"task.input={tmp_path}/in.txt",
                 f"task.output={tmp_path}/out.txt", "task.max_tokens=8192"]
    with caplog.at_level("INFO", logger="transformer_mt.tasks.translate"):
        run(compose_config(tmp_path / "run", overrides))
    assert re.search(rf"translated {len(lines)} lines in [\d.]+ s \([\d.]+ lines/s\)", caplog.text), caplog.text
    got = (tmp_path / "out.txt").read_text().split("\n")[:-1]
    expected = (out / "test.translations.txt").read_text().split("\n")[:-1]
    assert len(got) == len(lines)
    assert got[40] == "" and got[42] == ""
    assert got[:40] + [got[41]] + got[43:] == expected  # same sentences, same translations, same order


def test_stdin_to_stdout_with_nbest_and_scores(toy_run, tmp_path):
    out, _ = toy_run
    sources = ToyCorpus().load("test").src[:5]
    result = run_py("task=translate", f"ckpt_path={out}/checkpoints/best.ckpt", "decoding=beam", "decoding.nbest=3",
                    f"hydra.run.dir={tmp_path}", input="\n".join([sources[0], "", *sources[1:]]) + "\n", timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    rows = [line.split("\t") for line in result.stdout.splitlines()]
    assert [int(r[0]) for r in rows] == [i for i in range(6) for _ in range(3)]
    for i in range(0, len(rows), 3):
        scores = [float(r[1]) for r in rows[i : i + 3]]
        assert scores == sorted(scores, reverse=True)
    assert [r[2] for r in rows[3:6]] == ["", "", ""]  # the empty line


def test_interactive_a_line_in_a_translation_out(toy_run, tmp_path):
    out, _ = toy_run
    sentences = ToyCorpus().load("test").src[:2]
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [python(env), str(ROOT / "run.py"), "task=translate", f"ckpt_path={out}/checkpoints/best.ckpt",
         "task.buffer_size=1", f"hydra.run.dir={tmp_path}"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1,
        env=env,
    )
    try:
        for sentence in sentences:
            proc.stdin.write(sentence + "\n")
            proc.stdin.flush()
            ready, _, _ = select.select([proc.stdout], [], [], 120)
            assert ready, "no translation came back while stdin stayed open"
            assert proc.stdout.readline().strip()
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()


@pytest.mark.cli  # a message, a status and files
def test_missing_input_file_is_a_clean_error(toy_run, tmp_path):
    out, _ = toy_run
    overrides = ["task=translate", f"ckpt_path={out}/checkpoints/best.ckpt", f"task.input={tmp_path}/nope.txt",
                 f"task.output={tmp_path}/out.txt"]
    with pytest.raises(Exception) as err:  # as run.py sees it: the user's error that it prints as one line
        run(compose_config(tmp_path / "run", overrides))
    assert isinstance(find_user_error(err.value), DataError), err.value
    assert str(find_user_error(err.value)) == f"{tmp_path}/nope.txt: no such file"
    assert not (tmp_path / "out.txt").exists()


def test_the_compiled_static_step_translates_as_the_default_path(toy_run, tmp_path):
    out, _ = toy_run
    (tmp_path / "in.txt").write_text("\n".join(ToyCorpus().load("test").src[:40]) + "\n")
    texts = {}
    for static in ("false", "true"):
        overrides = ["task=translate", f"ckpt_path={out}/checkpoints/best.ckpt", f"task.input={tmp_path}/in.txt",
                     f"task.output={tmp_path}/{static}.txt", "task.max_tokens=8192", "decoding=beam",
                     "decoding.nbest=2", "task.scores=true", f"decoding.options.static_step={static}"]
        run(compose_config(tmp_path / static, overrides))
        texts[static] = [line.split("\t") for line in (tmp_path / f"{static}.txt").read_text().splitlines()]
    assert len(texts["true"]) == 80
    assert [(r[0], r[2]) for r in texts["true"]] == [(r[0], r[2]) for r in texts["false"]]
    assert [float(r[1]) for r in texts["true"]] == pytest.approx([float(r[1]) for r in texts["false"]], abs=1e-4)


def killed_while_translating(args: list[str], output: Path) -> Path:
    """Start `python run.py ARGS`, SIGKILL it once it says it decodes and its temporary output is
    there (atomic_file's `.NAME.XXXXXXXX.tmp`), and give that temporary file's path."""
    process = subprocess.Popen([sys.executable, str(ROOT / "run.py"), *args], cwd=ROOT, stderr=subprocess.PIPE,
                               text=True)
    said = []
    try:
        for line in process.stderr:  # the run's log, line by line: kill it while it translates
            said.append(line)
            if "decodes on" in line:
                break
        deadline = time.monotonic() + 30
        while not (left := list(output.parent.glob(f".{output.name}.*.tmp"))) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert process.poll() is None and len(left) == 1, "".join(said)[-2000:]
        process.send_signal(signal.SIGKILL)
    finally:
        process.kill()
        process.wait(timeout=60)
    assert process.returncode == -signal.SIGKILL
    return left[0]


@pytest.mark.cli  # a message, a status and files
def test_the_temporary_output_of_a_killed_translate_is_removed_by_the_next_run(tmp_path):
    """kill -9 while task=translate writes task.output leaves its temporary file (the output never
    appears half-written); the next run writing that output removes it, says so in one line, and
    writes the output whole."""
    shipped = ROOT / "experiments" / "multi30k" / "multi30k_en_de.ckpt"
    lines = [f"A man in a blue shirt is riding a bicycle down street number {i}." for i in range(500)]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n")
    output = tmp_path / "out.txt"
    args = ["task=translate", f"ckpt_path={shipped}", f"task.input={tmp_path}/in.txt", f"task.output={output}"]
    left = killed_while_translating([*args, f"hydra.run.dir={tmp_path}/a"], output)
    assert left.is_file() and not output.exists()  # the killed run's: nothing else would ever remove it
    again = run_py(*args, f"hydra.run.dir={tmp_path}/b")
    assert again.returncode == 0, again.stderr[-2000:]
    removed = [line for line in again.stderr.splitlines() if "killed run" in line]
    assert len(removed) == 1 and removed[0].endswith(
        f"[WARNING] - removed {left}: the temporary output of task.output={output} that a killed run left (it never "
        "became the output)"), again.stderr[-2000:]
    assert not list(tmp_path.glob(".out.txt*")) and len(output.read_text().splitlines()) == len(lines)


@pytest.mark.cli  # a message, a status and files
def test_a_second_writer_of_one_output_is_refused_while_the_first_runs(toy_run, tmp_path):
    """Two task=translate processes with one task.output: the second is one line, exit 1, while the
    first writes; the first ends with every line; the lock is gone after it."""
    import sys
    import time

    out, _ = toy_run
    sources = ToyCorpus().load("test").src
    (tmp_path / "in.txt").write_text("\n".join(sources * 6) + "\n")
    args = ["task=translate", f"ckpt_path={out}/checkpoints/best.ckpt", f"task.input={tmp_path}/in.txt",
            f"task.output={tmp_path}/out.txt", "decoding=beam"]
    first = subprocess.Popen([sys.executable, str(ROOT / "run.py"), *args, f"hydra.run.dir={tmp_path}/a"], cwd=ROOT,
                             stderr=subprocess.PIPE, text=True)
    lock = tmp_path / ".out.txt.lock"
    deadline = time.monotonic() + 120
    while not lock.exists() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    second = run_py(*args, f"hydra.run.dir={tmp_path}/b")
    assert first.poll() is None, "the first ended before the second started: give it more lines"
    assert second.returncode == 1 and second.stderr.strip().splitlines()[-1].startswith(
        f"error: task.output={tmp_path}/out.txt: another process is writing it (pid {first.pid} on "), second.stderr
    assert first.wait(timeout=600) == 0, first.stderr.read()[-2000:]
    assert len((tmp_path / "out.txt").read_text().splitlines()) == 6 * len(sources) and not lock.exists()
