"""The synthetic stage on several devices (trainer.devices > 1): device k of N translates chunks k,
k + N, ... in a process of its own, and the corpus is the one a single device writes, in input
order, also when some chunks were done before; a ConfigError in a process is the run's one line;
the work and its sources cross to a spawned process (a GPU's)."""

import pickle
from functools import partial
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from transformer_mt.checkpoints.loading import task_devices
from transformer_mt.config import plain
from transformer_mt.errors import ConfigError
from transformer_mt.schema.search_keys import SampleNode
from transformer_mt.tasks.pipelines.stage_work import corpus_sources, file_sources
from transformer_mt.tasks.pipelines.synthetic import TranslationSettings, translate_chunks, write_synthetic

CPU = torch.device("cpu")


def translation(checkpoint: Path, tag: str | None = None) -> TranslationSettings:
    """Sampling (each chunk seeded from the seed and its number) with short outputs, chunks of 40 lines."""
    decoding = OmegaConf.structured(SampleNode)  # decoding=sample's keys and defaults
    decoding.options.max_len_b = 5
    return TranslationSettings((checkpoint,), plain(decoding), None, tag, 512, 40, 7)


@pytest.fixture
def sources(small_run, tmp_path) -> Path:
    """The small run's 300 training sources, as a file."""
    config = OmegaConf.load(small_run[0] / "config.yaml")
    chunks, _ = corpus_sources(config.data.corpora.toy)
    path = tmp_path / "sources.txt"
    path.write_text("".join(line + "\n" for chunk in chunks for line in chunk))
    return path


def test_two_devices_write_the_corpus_one_device_writes_in_input_order_and_resume(small_checkpoint, sources,
                                                                                  tmp_path):
    work, lines = translation(small_checkpoint), partial(file_sources, sources)
    one, two = tmp_path / "one", tmp_path / "two"
    assert write_synthetic(work, lines, one, ("src", "tgt"), [CPU], progress=False) == 300
    assert write_synthetic(work, lines, two, ("src", "tgt"), [CPU, CPU], progress=False) == 300
    assert len(list((two / "chunks").glob("*.out"))) == 8  # 300 lines in chunks of 40
    for name in ("train.src", "train.tgt"):
        assert (two / name).read_text() == (one / name).read_text()
    assert (one / "train.src").read_text() == sources.read_text()
    translations = (one / "train.tgt").read_text().splitlines()
    assert len(set(translations)) > 30  # sampled: the chunks' seeds, not one draw repeated
    for chunk in ("00002", "00005", "00006"):  # stopped with these chunks not done: the others are kept
        (two / "chunks" / f"{chunk}.out").unlink()
    kept = (two / "chunks" / "00003.out").stat().st_mtime_ns
    assert write_synthetic(work, lines, two, ("src", "tgt"), [CPU, CPU], progress=False) == 300
    assert (two / "train.tgt").read_text() == (one / "train.tgt").read_text()
    assert (two / "chunks" / "00003.out").stat().st_mtime_ns == kept


def test_an_error_in_a_devices_process_is_the_runs_one_line(small_checkpoint, sources, tmp_path):
    with pytest.raises(ConfigError, match=r"task\.tag=nope: ") as error:
        write_synthetic(translation(small_checkpoint, tag="nope"), partial(file_sources, sources), tmp_path,
                        ("src", "tgt"), [CPU, CPU], progress=False)
    assert "\n" not in str(error.value) and "Traceback" not in str(error.value)


def test_the_work_and_its_sources_cross_to_a_spawned_process(small_run, small_checkpoint, tmp_path):
    config = OmegaConf.load(small_run[0] / "config.yaml")
    for sources in (partial(corpus_sources, config.data.corpora.toy), partial(file_sources, tmp_path / "mono.txt")):
        work = pickle.loads(pickle.dumps(partial(translate_chunks, translation(small_checkpoint), sources, tmp_path)))
        assert work.args[0].models == (small_checkpoint,) and work.args[1].func is sources.func


@pytest.mark.parametrize(("trainer", "devices"), [
    ({"accelerator": "cpu", "devices": 3}, [CPU] * 3),
    ({"accelerator": "cpu", "devices": [0, 1]}, [CPU] * 2),
    ({"accelerator": "auto", "devices": "auto"}, [CPU] if not torch.cuda.is_available() else None),
    ({"accelerator": "cpu", "devices": 1}, [CPU]),
])
def test_trainer_devices_are_the_synthetic_stages_processes(trainer, devices):
    if devices is not None:
        assert task_devices(OmegaConf.create(trainer)) == devices


@pytest.mark.parametrize(("trainer", "message"), [
    ({"accelerator": "cpu", "devices": 0}, "trainer.devices=0: a number >= 1, a list of GPU numbers, -1 or auto"),
    ({"accelerator": "tpu", "devices": 1}, "trainer.accelerator=tpu: translating and scoring run on auto, cpu or gpu"),
])
def test_devices_that_cannot_be_are_one_line(trainer, message):
    with pytest.raises(ConfigError) as error:
        task_devices(OmegaConf.create(trainer))
    assert str(error.value) == message
