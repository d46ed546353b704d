"""ckpt_path=[a.ckpt,b.ckpt] from run.py: task=translate, task=score and task=evaluate with an
ensemble; a model ensembled with itself gives its own outputs; members must share their tokenizer."""

import pytest

from tests.helpers import ROOT, compose_config
from transformer_mt.data.toy import ToyCorpus
from transformer_mt.errors import ConfigError
from transformer_mt.tasks import run

pytestmark = pytest.mark.slow

SHIPPED = ROOT / "experiments" / "multi30k" / "multi30k_en_de.ckpt"


def outputs(tmp_path, name: str, overrides: list[str]) -> list[str]:
    run(compose_config(tmp_path / name, [*overrides, f"task.output={tmp_path}/{name}.txt"]))
    return (tmp_path / f"{name}.txt").read_text().splitlines()


def test_a_model_ensembled_with_itself_translates_and_scores_as_it_does_alone(toy_run, tmp_path):
    best = toy_run[0] / "checkpoints" / "best.ckpt"
    sources = ToyCorpus().load("test").src[:12]
    (tmp_path / "in.txt").write_text("\n".join(sources) + "\n")
    translate = ["task=translate", f"task.input={tmp_path}/in.txt", "decoding=beam", "task.scores=true"]
    alone = outputs(tmp_path, "alone", [*translate, f"ckpt_path={best}"])
    twice = outputs(tmp_path, "twice", [*translate, f"ckpt_path=[{best},{best}]"])
    assert [line.split("\t")[2] for line in twice] == [line.split("\t")[2] for line in alone]
    assert [float(line.split("\t")[1]) for line in twice] == pytest.approx(
        [float(line.split("\t")[1]) for line in alone], abs=1e-3)  # printed with 4 decimals
    (tmp_path / "hyp.txt").write_text("".join(line.split("\t")[2] + "\n" for line in alone))
    score = ["task=score", f"task.source={tmp_path}/in.txt", f"task.target={tmp_path}/hyp.txt"]
    single = outputs(tmp_path, "score1", [*score, f"ckpt_path={best}"])
    double = outputs(tmp_path, "score2", [*score, f"ckpt_path=[{best},{best}]"])
    for a, b in zip(single, double, strict=True):
        assert [float(x) for x in b.split("\t")] == pytest.approx([float(x) for x in a.split("\t")], abs=1e-5)


def test_members_with_different_tokenizers_and_an_ensemble_where_one_checkpoint_goes_are_refused(
        small_checkpoint, tmp_path):
    (tmp_path / "in.txt").write_text("a dog\n")
    with pytest.raises(ConfigError, match=rf"ckpt_path: {small_checkpoint} and {SHIPPED} have different tokenizers"):
        run(compose_config(tmp_path / "t", ["task=translate", f"task.input={tmp_path}/in.txt",
                                            f"ckpt_path=[{small_checkpoint},{SHIPPED}]"]))
    with pytest.raises(ConfigError, match=r"this task takes one checkpoint \(a list, ckpt_path=\[a.ckpt,b.ckpt\], "
                                          r"is an ensemble for task=translate, task=score and task=evaluate"):
        run(compose_config(tmp_path / "e", ["task=export", "task.format=hf",
                                            f"ckpt_path=[{small_checkpoint},{small_checkpoint}]"]))


def test_evaluate_scores_an_ensemble_and_names_every_member(toy_run, tmp_path):
    """The toy model ensembled with itself: the same translations, BLEU and loss as alone (the
    loss of the averaged probabilities); metrics.json lists both members."""
    out, metrics = toy_run
    best = out / "checkpoints" / "best.ckpt"
    alone = run(compose_config(tmp_path / "alone", ["task=evaluate", f"ckpt_path={best}"]))
    twice = run(compose_config(tmp_path / "twice", ["task=evaluate", f"ckpt_path=[{best},{best}]"]))
    assert twice["checkpoint"] == [str(best), str(best)] and alone["test/bleu"] == metrics["test/bleu"]
    assert twice["test/bleu"] == alone["test/bleu"] and twice["test/ter"] == alone["test/ter"]
    assert twice["test/loss"] == pytest.approx(alone["test/loss"], abs=1e-5)
    assert twice["test/nll"] == pytest.approx(alone["test/nll"], abs=1e-5)
    assert (tmp_path / "twice" / "test.translations.txt").read_text() == (out / "test.translations.txt").read_text()


def test_evaluate_translate_and_score_agree_on_an_int8_ensemble(toy_run, tmp_path):
    """One Translator decodes for the three tasks: an int8 ensemble (every member's int8 copy)
    evaluates, translates and scores alike. int8 quantizes activations per batch and the tasks batch
    differently, so a few lines may differ (as for one int8 model: tests/e2e/test_quantize.py)."""
    checkpoints = toy_run[0] / "checkpoints"
    members = f"ckpt_path=[{checkpoints / 'best.ckpt'},{checkpoints / 'last.ckpt'}]"
    evaluated = run(compose_config(tmp_path / "eval", ["task=evaluate", members, "quantize=int8"]))
    assert evaluated["quantize"] == "int8" and len(evaluated["checkpoint"]) == 2
    expected = (tmp_path / "eval" / "test.translations.txt").read_text().splitlines()
    (tmp_path / "in.txt").write_text("\n".join(ToyCorpus().load("test").src) + "\n")
    translated = outputs(tmp_path, "translate", ["task=translate", f"task.input={tmp_path}/in.txt", members,
                                                 "quantize=int8", "task.scores=true"])
    texts = [line.split("\t")[2] for line in translated]
    assert len(texts) == len(expected) == 300 and sum(a == b for a, b in zip(texts, expected)) >= 290
    (tmp_path / "hyp.txt").write_text("".join(t + "\n" for t in texts))
    scored = outputs(tmp_path, "score", ["task=score", f"task.source={tmp_path}/in.txt",
                                         f"task.target={tmp_path}/hyp.txt",
                                         members, "quantize=int8"])  # greedy: the sum, as translate reports it
    close = sum(abs(float(s.split("\t")[0]) - float(t.split("\t")[1])) < 0.05 for s, t in zip(scored, translated))
    assert len(scored) == 300 and close >= 285
