"""A full disk while writing a checkpoint, metrics, translations or the cache: a DiskFull naming the
file ("PATH: No space left on device", one line from run.py), the temporary file or folder removed,
what was there before kept whole.

The disk fills for real: once `fill_disk` is called, the writers' temporary file is /dev/full (for
the cache, the Arrow file in the temporary folder is), which fails writes with ENOSPC as a full disk
does."""

import errno
import os
import tempfile
from pathlib import Path

import pytest
import torch

import transformer_mt.atomic as atomic
from transformer_mt.data.datamodule import TranslationDataModule
from transformer_mt.data.tokenizer import TokenizerOptions
from transformer_mt.data.toy import ToyCorpus
from transformer_mt.errors import DiskFull, find_user_error
from transformer_mt.tasks.runs.outputs import write_json, write_translations
from transformer_mt.training.atomic_io import AtomicCheckpointIO
from transformer_mt.training.results import ScoredSentence

NO_SPACE = "No space left on device"


def fill_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """From now on atomic_file's temporary file is /dev/full, and atomic_dir's temporary folder
    holds an `ids.arrow` that is /dev/full."""
    mkstemp, mkdtemp = tempfile.mkstemp, tempfile.mkdtemp

    def full_file(**kwargs) -> tuple[int, str]:
        fd, name = mkstemp(**kwargs)
        os.close(fd)
        os.unlink(name)
        os.symlink("/dev/full", name)
        return os.open(name, os.O_WRONLY), name

    def full_folder(**kwargs) -> str:
        name = mkdtemp(**kwargs)
        os.symlink("/dev/full", os.path.join(name, "ids.arrow"))
        return name

    monkeypatch.setattr(atomic.tempfile, "mkstemp", full_file)
    monkeypatch.setattr(atomic.tempfile, "mkdtemp", full_folder)


def hidden(folder: Path) -> list[str]:
    """Temporary files and folders left in `folder`."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_torch_save_to_a_path_hides_the_full_disk_to_a_file_names_it():
    """Why checkpoints are written through a Python file: torch's own writer says only "unexpected
    pos"; through a file object the OSError ENOSPC comes out (with torch's error raised over it)."""
    with pytest.raises(RuntimeError, match="unexpected pos") as by_path:
        torch.save({"w": torch.zeros(10_000)}, "/dev/full")
    assert find_user_error(by_path.value) is None
    with pytest.raises(Exception) as by_file, open("/dev/full", "wb") as f:
        torch.save({"w": torch.zeros(10_000)}, f)
    assert str(find_user_error(by_file.value)) == f"{NO_SPACE} (writing the run's files, the cache or output)"


def test_a_checkpoint_on_a_full_disk_is_named_and_the_previous_one_kept(tmp_path, monkeypatch):
    path = tmp_path / "last.ckpt"
    AtomicCheckpointIO().save_checkpoint({"step": 1, "w": torch.ones(3)}, path)
    before = path.read_bytes()
    fill_disk(monkeypatch)
    with pytest.raises(DiskFull) as err:
        AtomicCheckpointIO().save_checkpoint({"step": 2, "w": torch.zeros(100_000)}, path)
    assert str(err.value) == f"{path}: {NO_SPACE}"
    assert path.read_bytes() == before and hidden(tmp_path) == []


def test_metrics_and_translations_on_a_full_disk_are_named_and_the_previous_ones_kept(tmp_path, monkeypatch):
    write_json(tmp_path / "metrics.json", {"test/bleu": 1.0})
    fill_disk(monkeypatch)
    with pytest.raises(DiskFull) as err:
        write_json(tmp_path / "metrics.json", {"test/bleu": 2.0})
    assert str(err.value) == f"{tmp_path / 'metrics.json'}: {NO_SPACE}"
    with pytest.raises(DiskFull) as err:
        write_translations(tmp_path / "test.translations.txt", (ScoredSentence(0, "a", "b", "c" * 10_000),))
    assert str(err.value) == f"{tmp_path / 'test.translations.txt'}: {NO_SPACE}"
    assert (tmp_path / "metrics.json").read_text() == '{\n  "test/bleu": 1.0\n}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json"]


def test_token_ids_on_a_full_disk_name_the_cache_entry_and_leave_no_half_entry(tmp_path, monkeypatch):
    dm = TranslationDataModule({"toy": ToyCorpus(num_train=300, num_val=10, num_test=10)},
                               TokenizerOptions(vocab_size=120), cache_dir=str(tmp_path))
    dm.vocabularies()  # made and cached while there is room: the token ids are what fills the disk
    fill_disk(monkeypatch)
    with pytest.raises(DiskFull) as err:
        dm.prepare_data()
    assert str(err.value) == f"{dm._ids_folder('train')}: {NO_SPACE}"
    assert hidden(tmp_path) == [] and not list(tmp_path.glob("ids-*"))


def test_a_full_disk_anywhere_is_a_user_error_naming_the_file_if_known():
    assert str(find_user_error(OSError(errno.ENOSPC, NO_SPACE, "/runs/x/csv/metrics.csv"))) == \
        f"/runs/x/csv/metrics.csv: {NO_SPACE}"
    quota = RuntimeError("wrapped")
    quota.__context__ = OSError(errno.EDQUOT, "Disk quota exceeded")
    assert str(find_user_error(quota)) == "Disk quota exceeded (writing the run's files, the cache or output)"
    assert find_user_error(OSError(errno.EACCES, "Permission denied")) is None
