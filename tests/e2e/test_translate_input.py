"""task=translate input checks: stdin is read as bytes and checked (invalid UTF-8, NUL bytes) before
anything is translated, and `output=` is checked before the model is loaded; `input=` a directory or
an unreadable file is one line naming it, and a named pipe is read."""

import io
import os
import subprocess
import sys
import threading
from types import SimpleNamespace

import pytest

from tests.helpers import ROOT, assert_clean_failure, compose_config, not_our_checkpoint, run_py
from transformer_mt.data.toy import ToyCorpus
from transformer_mt.errors import ConfigError, DataError
from transformer_mt.tasks import run

pytestmark = pytest.mark.cli  # messages, statuses and files: not run again under the portable profile

SHIPPED = ROOT / "experiments" / "multi30k" / "multi30k_en_de.ckpt"


@pytest.fixture
def checkpoint(small_checkpoint):
    return small_checkpoint


@pytest.fixture
def translate(monkeypatch, capsys):
    """task=translate with stdin piped in (not a terminal), in this process (a process costs seconds
    of imports): the exit status, stdout and stderr run.py gives (for a DataError or ConfigError, 1
    and its one line `error: ...`; test_invalid_utf8_on_stdin_writes_nothing runs run.py itself)."""
    def call(checkpoint, tmp_path, stdin: bytes, *args: str) -> SimpleNamespace:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        cfg = compose_config(tmp_path / "run", ["task=translate", f"ckpt_path={checkpoint}",
                                                "decoding.options.max_len_b=5", *args])
        try:
            run(cfg)
            status, stderr = 0, ""
        except (DataError, ConfigError) as err:
            status, stderr = 1, f"error: {err}\n"
        return SimpleNamespace(returncode=status, stdout=capsys.readouterr().out, stderr=stderr)

    return call


def translate_process(checkpoint, tmp_path, stdin: bytes, *args: str) -> subprocess.CompletedProcess:
    """`python run.py task=translate` with `stdin` piped in (not a terminal); stdout / stderr as text."""
    return run_py("task=translate", f"ckpt_path={checkpoint}", "decoding.options.max_len_b=5",
                  f"hydra.run.dir={tmp_path}/run", *args, input=stdin)


def sentences(n: int) -> bytes:
    src = ToyCorpus(num_train=0, num_val=0, num_test=20).load("test").src
    return "".join(src[i % len(src)] + "\n" for i in range(n)).encode()


def test_invalid_utf8_on_stdin_writes_nothing(checkpoint, tmp_path):
    stdin = sentences(1499) + b"the \xff dog\n" + sentences(10)
    result = translate_process(checkpoint, tmp_path, stdin)
    assert_clean_failure(result, "error: stdin:1500: invalid UTF-8 (byte 0xff)")
    assert result.stdout == ""


def test_binary_stdin_is_a_nul_byte_error(checkpoint, tmp_path, translate):
    result = translate(checkpoint, tmp_path, sentences(2) + b"\x7fELF\x02\x01\x01\x00\x00\x00\n\x00\x00")
    assert_clean_failure(result, "error: stdin:3: NUL byte (is this a binary file?)")
    assert result.stdout == ""


def test_bad_stdin_with_output_file_leaves_no_file(checkpoint, tmp_path, translate):
    result = translate(checkpoint, tmp_path, sentences(3) + b"\xc3\x28\n", f"task.output={tmp_path}/out.txt")
    assert_clean_failure(result, "error: stdin:4: invalid UTF-8 (byte 0xc3)")
    assert not (tmp_path / "out.txt").exists()


def test_explicit_buffer_size_streams_until_the_bad_line(checkpoint, tmp_path, translate):
    result = translate(checkpoint, tmp_path, sentences(2) + b"bad \xff\n" + sentences(2), "task.buffer_size=1")
    assert_clean_failure(result, "error: stdin:3: invalid UTF-8 (byte 0xff)")
    assert len(result.stdout.splitlines()) == 2  # lines before the bad one were translated as they came


def test_crlf_and_bom_on_stdin_translate_like_plain_lines(checkpoint, tmp_path, translate):
    plain = translate(checkpoint, tmp_path, sentences(3))
    dos = translate(checkpoint, tmp_path, b"\xef\xbb\xbf" + sentences(3).replace(b"\n", b"\r\n"))
    assert plain.returncode == 0 and dos.returncode == 0, dos.stderr[-2000:]
    assert dos.stdout == plain.stdout and len(plain.stdout.splitlines()) == 3


def test_output_that_is_a_directory_fails_before_translating(checkpoint, tmp_path, translate):
    result = translate(checkpoint, tmp_path, sentences(3), f"task.output={tmp_path}")
    assert_clean_failure(result, f"error: task.output={tmp_path}: is a directory")
    assert result.stdout == ""


def test_output_checks_come_before_the_model_is_loaded(tmp_path):
    from transformer_mt.tasks import translate as task

    (tmp_path / "in.txt").write_text("a cat\n")
    not_our_checkpoint(tmp_path / "model.ckpt")
    (tmp_path / "file").write_text("not a folder")
    base = ["task=translate", f"ckpt_path={tmp_path}/model.ckpt", f"task.input={tmp_path}/in.txt"]
    with pytest.raises(ConfigError) as err:
        task.run(compose_config(tmp_path / "run", [*base, f"task.output={tmp_path}"]))
    assert str(err.value) == f"task.output={tmp_path}: is a directory"
    with pytest.raises(ConfigError) as err:
        task.run(compose_config(tmp_path / "run", [*base, f"task.output={tmp_path}/file/sub/out.txt"]))
    assert str(err.value) == (f"task.output={tmp_path}/file/sub/out.txt: cannot create it, "
                              f"{tmp_path}/file is not a directory")


def test_a_line_of_only_invisible_characters_is_an_empty_line(checkpoint, tmp_path, translate):
    """A zero-width space (and a BOM, a space) shows nothing: the line is empty and gets an empty
    translation, not one made up from an invisible token."""
    plain = translate(checkpoint, tmp_path, sentences(2))
    result = translate(checkpoint, tmp_path, "\u200b\n \ufeff\u200b \n".encode() + sentences(2))
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split("\n") == ["", "", *plain.stdout.split("\n")]


def test_an_input_that_is_a_directory_is_one_line_before_the_model_loads(tmp_path):
    not_our_checkpoint(tmp_path / "model.ckpt")
    result = run_py("task=translate", f"ckpt_path={tmp_path}/model.ckpt", f"task.input={tmp_path}",
                    f"task.output={tmp_path}/out.txt", f"hydra.run.dir={tmp_path}/run")
    assert_clean_failure(result, f"error: {tmp_path}: is a directory")
    assert result.stderr.strip().splitlines()[-1] == f"error: {tmp_path}: is a directory"
    assert result.stdout == "" and not (tmp_path / "out.txt").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its mode")
def test_an_unreadable_input_file_says_permission_denied(tmp_path):
    not_our_checkpoint(tmp_path / "model.ckpt")
    (tmp_path / "in.txt").write_text("a cat\n")
    (tmp_path / "in.txt").chmod(0)
    with pytest.raises(DataError) as err:
        run(compose_config(tmp_path / "run", ["task=translate", f"ckpt_path={tmp_path}/model.ckpt",
                                              f"task.input={tmp_path}/in.txt"]))
    assert str(err.value) == f"{tmp_path}/in.txt: permission denied"


def test_a_fifo_input_is_read_as_it_comes(tmp_path):
    """task.input= a named pipe (as /dev/stdin or <(command) give): read whole, translated line for line."""
    os.mkfifo(tmp_path / "in.fifo")

    def feed() -> None:
        with open(tmp_path / "in.fifo", "w") as pipe:  # blocks until the run opens it
            pipe.write("A dog runs on the beach.\n\nTwo dogs are playing in the snow.\n")

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    run(compose_config(tmp_path / "run", ["task=translate", f"ckpt_path={SHIPPED}", f"task.input={tmp_path}/in.fifo",
                                          f"task.output={tmp_path}/out.txt"]))
    writer.join(timeout=10)
    out = (tmp_path / "out.txt").read_text().split("\n")[:-1]
    assert len(out) == 3 and "Hund" in out[0] and out[1] == "" and "Hunde" in out[2], out
