"""task=translate input checks: stdin is read as bytes and checked (invalid UTF-8, NUL bytes) before
anything is translated, and `output=` is checked before the model is loaded."""

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from tests.helpers import ROOT, assert_clean_failure, compose_config
from transformer_mt.data.toy import ToyCorpus
from transformer_mt.errors import ConfigError


@pytest.fixture
def checkpoint(small_checkpoint):
    return small_checkpoint


def translate(checkpoint, tmp_path, stdin: bytes, *args: str) -> SimpleNamespace:
    """`python run.py task=translate` with `stdin` piped in (not a terminal); stdout / stderr as text."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    result = subprocess.run([sys.executable, str(ROOT / "run.py"), "task=translate", f"ckpt_path={checkpoint}",
                             "decoding.options.max_len_b=5", f"hydra.run.dir={tmp_path}/run", *args],
                            cwd=ROOT, env=env, input=stdin, capture_output=True, timeout=600)
    return SimpleNamespace(returncode=result.returncode, stdout=result.stdout.decode("utf-8", "replace"),
                           stderr=result.stderr.decode("utf-8", "replace"))


def sentences(n: int) -> bytes:
    src = ToyCorpus(num_train=0, num_val=0, num_test=20).load("test").src
    return "".join(src[i % len(src)] + "\n" for i in range(n)).encode()


def test_invalid_utf8_on_stdin_writes_nothing(checkpoint, tmp_path):
    stdin = sentences(1499) + b"the \xff dog\n" + sentences(10)
    result = translate(checkpoint, tmp_path, stdin)
    assert_clean_failure(result, "error: stdin:1500: invalid UTF-8 (byte 0xff)")
    assert result.stdout == ""


def test_binary_stdin_is_a_nul_byte_error(checkpoint, tmp_path):
    result = translate(checkpoint, tmp_path, sentences(2) + b"\x7fELF\x02\x01\x01\x00\x00\x00\n\x00\x00")
    assert_clean_failure(result, "error: stdin:3: NUL byte (is this a binary file?)")
    assert result.stdout == ""


def test_bad_stdin_with_output_file_leaves_no_file(checkpoint, tmp_path):
    result = translate(checkpoint, tmp_path, sentences(3) + b"\xc3\x28\n", f"output={tmp_path}/out.txt")
    assert_clean_failure(result, "error: stdin:4: invalid UTF-8 (byte 0xc3)")
    assert not (tmp_path / "out.txt").exists()


def test_explicit_buffer_size_streams_until_the_bad_line(checkpoint, tmp_path):
    result = translate(checkpoint, tmp_path, sentences(2) + b"bad \xff\n" + sentences(2), "task.buffer_size=1")
    assert_clean_failure(result, "error: stdin:3: invalid UTF-8 (byte 0xff)")
    assert len(result.stdout.splitlines()) == 2  # lines before the bad one were translated as they came


def test_crlf_and_bom_on_stdin_translate_like_plain_lines(checkpoint, tmp_path):
    plain = translate(checkpoint, tmp_path, sentences(3))
    dos = translate(checkpoint, tmp_path, b"\xef\xbb\xbf" + sentences(3).replace(b"\n", b"\r\n"))
    assert plain.returncode == 0 and dos.returncode == 0, dos.stderr[-2000:]
    assert dos.stdout == plain.stdout and len(plain.stdout.splitlines()) == 3


def test_output_that_is_a_directory_fails_before_translating(checkpoint, tmp_path):
    result = translate(checkpoint, tmp_path, sentences(3), f"output={tmp_path}")
    assert_clean_failure(result, f"error: output={tmp_path}: is a directory")
    assert result.stdout == ""


def test_output_checks_come_before_the_model_is_loaded(tmp_path):
    """model.ckpt is no checkpoint: loading it would stop the run with another error."""
    from transformer_mt.tasks import translate as task

    (tmp_path / "in.txt").write_text("a cat\n")
    (tmp_path / "model.ckpt").write_bytes(b"x")
    (tmp_path / "file").write_text("not a folder")
    base = ["task=translate", f"ckpt_path={tmp_path}/model.ckpt", f"input={tmp_path}/in.txt"]
    with pytest.raises(ConfigError) as err:
        task.run(compose_config(tmp_path / "run", [*base, f"output={tmp_path}"]))
    assert str(err.value) == f"output={tmp_path}: is a directory"
    with pytest.raises(ConfigError) as err:
        task.run(compose_config(tmp_path / "run", [*base, f"output={tmp_path}/file/sub/out.txt"]))
    assert str(err.value) == f"output={tmp_path}/file/sub/out.txt: cannot create it, {tmp_path}/file is not a directory"


def test_a_line_of_only_invisible_characters_is_an_empty_line(checkpoint, tmp_path):
    """A zero-width space (and a BOM, a space) shows nothing: the line is empty and gets an empty
    translation, not one made up from an invisible token."""
    plain = translate(checkpoint, tmp_path, sentences(2))
    result = translate(checkpoint, tmp_path, "\u200b\n \ufeff\u200b \n".encode() + sentences(2))
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split("\n") == ["", "", *plain.stdout.split("\n")]
