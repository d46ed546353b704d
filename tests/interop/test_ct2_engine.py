"""task=translate task.engine=ctranslate2: the checkpoint converted once into ct2/ beside it (keyed by
its digest and the weights' type) and decoded by CTranslate2, with our reading, tags, prefixes,
batching and writing: greedy fp32 outputs equal ours line for line, each cut at its own length
limit as ours is; n-best, scores and prefixes as task=translate writes them; what CTranslate2 cannot
do refused in one line."""

import logging

import pytest

from tests.helpers import compose_config, toy_checkpoint_copy
from transformer_mt.errors import ConfigError
from transformer_mt.tasks import run

pytestmark = pytest.mark.slow
pytest.importorskip("ctranslate2")


@pytest.fixture
def checkpoint(toy_run, tmp_path):
    """The default job's best.ckpt, copied (the conversion writes beside it) with 300 test sources."""
    return toy_checkpoint_copy(toy_run[0], tmp_path)


def translate(tmp_path, checkpoint, name: str, *overrides: str) -> list[str]:
    run(compose_config(tmp_path / name, ["task=translate", f"ckpt_path={checkpoint}", f"task.input={tmp_path}/in.txt",
                                         f"task.output={tmp_path}/{name}.txt", *overrides]))
    return (tmp_path / f"{name}.txt").read_text().splitlines()


def test_greedy_fp32_equals_ours_line_for_line_also_cut_at_each_lines_limit(checkpoint, tmp_path, caplog):
    caplog.set_level(logging.INFO)
    ours = translate(tmp_path, checkpoint, "ours")
    engine = translate(tmp_path, checkpoint, "ct2", "task.engine=ctranslate2")
    assert engine == ours and len(ours) == 300
    folders = list((checkpoint.parent / "ct2").iterdir())
    assert len(folders) == 1 and folders[0].name.startswith("best-") and folders[0].name.endswith("-float32")
    assert "converted into" in caplog.text and "task.engine=ctranslate2 decodes on cpu" in caplog.text
    caplog.clear()
    short = ["decoding.options.max_len_a=0.3", "decoding.options.max_len_b=1"]  # outputs cut mid-sentence
    cut = translate(tmp_path, checkpoint, "ct2_cut", "task.engine=ctranslate2", *short)
    assert cut == translate(tmp_path, checkpoint, "ours_cut", *short) and cut != ours
    assert "converted before" in caplog.text and len(list((checkpoint.parent / "ct2").iterdir())) == 1


def test_nbest_with_scores_prefixes_and_int8(checkpoint, tmp_path):
    lines = translate(tmp_path, checkpoint, "nbest", "task.engine=ctranslate2", "decoding=beam", "decoding.nbest=2")
    rows = [line.split("\t") for line in lines]
    assert [int(r[0]) for r in rows] == [i for i in range(300) for _ in range(2)]
    assert all(float(r[1]) <= 0 for r in rows) and all(rows[i][2] != rows[i + 1][2] for i in range(0, 600, 2))
    sources = (tmp_path / "in.txt").read_text().splitlines()
    starts = [" ".join(line.split()[:1]) for line in ours_of(tmp_path, checkpoint)]
    (tmp_path / "in.txt").write_text("".join(f"{s}\t{p}\n" for s, p in zip(sources, starts)))
    prefixed = translate(tmp_path, checkpoint, "prefixed", "task.engine=ctranslate2", "task.prefix=true")
    assert all(out.startswith(p) for out, p in zip(prefixed, starts))
    (tmp_path / "in.txt").write_text("\n".join(sources) + "\n")
    int8 = translate(tmp_path, checkpoint, "int8", "task.engine=ctranslate2", "quantize=int8")
    assert len(int8) == 300 and any(p.name.endswith("-int8") for p in (checkpoint.parent / "ct2").iterdir())


def ours_of(tmp_path, checkpoint) -> list[str]:
    return translate(tmp_path, checkpoint, "ours_first_words")


@pytest.mark.parametrize("overrides, message", [
    (["task.alignment=true"], "task.alignment=true reads our model's cross-attention: it needs task.engine=ours"),
    (["decoding=beam", "decoding.length_norm._target_=transformer_mt.decoding.GnmtLength"],
     "task.engine=ctranslate2 has only the exponential length penalty"),
])
def test_what_ctranslate2_cannot_do_is_one_line(checkpoint, tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=message):
        translate(tmp_path, checkpoint, "refused", "task.engine=ctranslate2", *overrides)


def test_an_ensemble_is_refused_before_any_work(checkpoint, tmp_path):
    with pytest.raises(ConfigError, match=r"task.engine=ctranslate2 decodes one checkpoint"):
        translate(tmp_path, f"[{checkpoint},{checkpoint}]", "ensemble", "task.engine=ctranslate2")
    assert not (checkpoint.parent / "ct2").exists()
