"""Progress bars on stderr for long work outside training: translating, data preparation, averaging
and export. Drawn when stderr is a terminal (checked through a pseudo-terminal) or with
progress=true; never with stderr a pipe by default; never on stdout."""

import os
import pty
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.helpers import ROOT, compose_config, python, run_py
from transformer_mt.data.toy import ToyCorpus
from transformer_mt.errors import ConfigError, find_user_error
from transformer_mt.progress import DELAY, ProgressBar
from transformer_mt.tasks import run

pytestmark = pytest.mark.cli  # messages, statuses and files: not run again under the portable profile

ESC = "\x1b["


def run_on_terminal(args: list[str], stdin: Path | None = None) -> tuple[int, str, str]:
    """`python run.py ARGS` with stderr on a pseudo-terminal (stdout a pipe, stdin a file): its exit
    status, stdout and everything written to the terminal."""
    leader, follower = pty.openpty()
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "TERM": "xterm-256color", "COLUMNS": "120"}
    with open(stdin or os.devnull, "rb") as source:
        process = subprocess.Popen([python(env), str(ROOT / "run.py"), *args], cwd=ROOT, env=env, stdin=source,
                                   stdout=subprocess.PIPE, stderr=follower)
    os.close(follower)
    screen: list[bytes] = []

    def read() -> None:
        while True:
            try:
                data = os.read(leader, 65536)
            except OSError:  # EIO: the process closed the terminal
                return
            if not data:
                return
            screen.append(data)

    reader = threading.Thread(target=read)
    reader.start()
    stdout = process.stdout.read()
    process.wait(timeout=600)
    reader.join(timeout=30)
    os.close(leader)
    return process.returncode, stdout.decode(), b"".join(screen).decode("utf-8", "replace")


@pytest.fixture
def input_file(tmp_path) -> Path:
    """4,000 lines: seconds of translating (on one thread), more than the second before a bar appears."""
    src = ToyCorpus(num_train=0, num_val=0, num_test=50).load("test").src
    path = tmp_path / "input.txt"
    path.write_text("".join(src[i % len(src)] + "\n" for i in range(4000)))
    return path


def test_translate_draws_a_bar_on_a_terminal_and_never_on_stdout(small_checkpoint, input_file, tmp_path):
    args = ["task=translate", f"ckpt_path={small_checkpoint}", f"task.input={input_file}",
            "decoding.options.max_len_b=5"]
    status, stdout, screen = run_on_terminal([*args, f"hydra.run.dir={tmp_path}/a"])
    assert status == 0, screen[-2000:]
    assert "translating" in screen and "lines/s" in screen and "eta" in screen
    assert "/4000" in screen  # the count against the known total
    assert "4000/4000" in screen  # it reached the end before it was removed
    lines = stdout.splitlines()
    assert len(lines) == 4000 and ESC not in stdout

    few = tmp_path / "few.txt"  # asked for, a bar does not wait for a second of work
    few.write_text("".join(input_file.read_text().splitlines(keepends=True)[:100]))
    args = [*args[:2], f"task.input={few}", *args[3:]]
    asked = run_py(*args, f"hydra.run.dir={tmp_path}/c", "progress=true")  # drawn into the pipe too
    assert asked.returncode == 0 and "translating" in asked.stderr and "/100" in asked.stderr
    assert len(asked.stdout.splitlines()) == 100 and ESC not in asked.stdout


def test_data_preparation_shows_reading_tokenizer_training_and_encoding(tmp_path):
    status, _, screen = run_on_terminal(["progress=true", "trainer.max_steps=1", "data.corpora.toy.num_val=20",
                                         "data.corpora.toy.num_test=20", f"hydra.run.dir={tmp_path}/run",
                                         f"paths.cache_dir={tmp_path}/cache"])
    assert status == 0, screen[-3000:]
    assert "train: reading" in screen  # the rate shows once there are two samples of it: not in a second
    assert "training the tokenizer" in screen
    for split in ("train", "val", "test"):
        assert f"toy/{split}: encoding" in screen
    assert "/10000" in screen  # the toy training split's 10,000 pairs, counted before reading


def test_averaging_shows_a_bar_when_asked(small_run, tmp_path):
    epoch = next((small_run[0] / "checkpoints" / "epochs").glob("epoch*.ckpt"))
    result = run_py("task=average", f"ckpt_path=[{epoch},{epoch}]", f"task.output={tmp_path}/avg.ckpt",
                    f"hydra.run.dir={tmp_path}/run", "progress=true")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "averaging" in result.stderr and "2/2" in result.stderr
    assert result.stdout.strip() == f"{tmp_path}/avg.ckpt"  # stdout: the path only


def test_export_shows_a_spinner_when_asked(small_checkpoint, tmp_path):
    pytest.importorskip("transformers")
    result = run_py("task=export", f"ckpt_path={small_checkpoint}", "task.format=hf", f"task.output={tmp_path}/hf",
                    f"hydra.run.dir={tmp_path}/run", "progress=true")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "exporting to hf" in result.stderr and result.stdout.strip() == f"{tmp_path}/hf"


def test_a_bad_progress_value_is_named(tmp_path):
    with pytest.raises(Exception) as err:  # as run.py sees it: the ConfigError that it prints as one line
        run(compose_config(tmp_path / "run", ["progress=maybe"]))
    assert isinstance(find_user_error(err.value), ConfigError), err.value
    assert "progress='maybe': must be true, false or null" in str(find_user_error(err.value))
    with pytest.raises(ConfigError, match="progress=1"):
        ProgressBar("x", 1, "lines", 1)


def test_a_terminal_gets_a_bar_unless_refused_and_a_pipe_only_when_asked(monkeypatch):
    for terminal, setting, drawn in ((True, None, True), (True, False, False), (False, None, False),
                                     (False, True, True)):
        monkeypatch.setattr(sys.stderr, "isatty", lambda terminal=terminal: terminal)
        assert ProgressBar("x", 10, "lines", setting).enabled is drawn, (terminal, setting)


def test_a_bar_not_asked_for_stays_off_a_pipe(capsys):
    with ProgressBar("x", 10, "lines", None) as bar:  # pytest's stderr is not a terminal
        time.sleep(DELAY + 0.3)  # longer than a terminal waits before drawing
        bar.advance(10)
    with ProgressBar("x", 10, "lines", False) as bar:
        bar.advance(10)
    assert capsys.readouterr().err == ""
    assert bar.progress is None
