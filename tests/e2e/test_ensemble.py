"""ckpt_path=[a.ckpt,b.ckpt] from run.py: task=translate, task=score and task=evaluate with an
ensemble; a model ensembled with itself gives its own outputs; members must share their tokenizer."""

import pytest
import torch
from torch.nn.utils.rnn import pad_sequence

from tests.helpers import ROOT, compose_config
from transformer_mt.data.toy import ToyCorpus
from transformer_mt.errors import ConfigError, DataError
from transformer_mt.inference.members import load_translator
from transformer_mt.tasks import run

pytestmark = pytest.mark.slow

SHIPPED = ROOT / "experiments" / "multi30k" / "multi30k_en_de.ckpt"
ONE_BATCH_EVAL = "data.eval_max_tokens=100000"  # every test sentence in one batch


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
    with pytest.raises(DataError, match=rf"ckpt_path: {small_checkpoint} and {SHIPPED} have different tokenizers"):
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


def test_evaluate_translate_and_score_agree_on_an_int8_ensemble(toy_run, tmp_path, record_property):
    """One Translator decodes for the three tasks: an int8 ensemble (every member's int8 copy)
    evaluates, translates and scores alike, in batches of any size: int8 scales each row (a token of
    a sentence) by its own range. Evaluate (all 300 test sentences in one batch) and translate (in
    batches of 256 tokens) write the same translations; task=score gives the int8 members'
    teacher-forced log-probabilities, computed here by hand (both in one batch), and those equal
    the scores translate reports (the search's, one decoder step at a time) up to float rounding, as
    in fp32 (bound 1e-3 nats a line on average). The BLEU is a spread measured across numeric
    profiles (docs/layout.md, "Bounds that hold on any CPU"): int8 against the fp32 ensemble, test
    BLEU -0.07 / 0.00 / -0.23 apart on a 2-core AMD EPYC (Zen 5) under the native / avx2 / default
    profiles (bound 1.0: 3 lines of 300)."""
    checkpoints = toy_run[0] / "checkpoints"
    paths = [checkpoints / "best.ckpt", checkpoints / "last.ckpt"]
    members = f"ckpt_path=[{paths[0]},{paths[1]}]"
    evaluated = run(compose_config(tmp_path / "eval", ["task=evaluate", members, "quantize=int8", ONE_BATCH_EVAL]))
    assert evaluated["quantize"] == "int8" and len(evaluated["checkpoint"]) == 2
    fp32 = run(compose_config(tmp_path / "fp32", ["task=evaluate", members, ONE_BATCH_EVAL]))
    record_property("int8_minus_fp32_bleu", evaluated["test/bleu"] - fp32["test/bleu"])
    assert abs(evaluated["test/bleu"] - fp32["test/bleu"]) <= 1.0, (evaluated["test/bleu"], fp32["test/bleu"])
    expected = (tmp_path / "eval" / "test.translations.txt").read_text().splitlines()
    sources = ToyCorpus().load("test").src
    (tmp_path / "in.txt").write_text("\n".join(sources) + "\n")
    translated = outputs(tmp_path, "translate", ["task=translate", f"task.input={tmp_path}/in.txt", members,
                                                 "quantize=int8", "task.scores=true", "task.max_tokens=256"])
    texts = [line.split("\t")[2] for line in translated]
    assert len(texts) == 300 and texts == expected
    (tmp_path / "hyp.txt").write_text("".join(t + "\n" for t in texts))
    scored = outputs(tmp_path, "score", ["task=score", f"task.source={tmp_path}/in.txt",
                                         f"task.target={tmp_path}/hyp.txt", members, "quantize=int8",
                                         "task.max_tokens=100000"])  # one batch, as the hand computation
    sums = [float(line.split("\t")[0]) for line in scored]  # greedy: the sum, as translate reports it
    assert sums == pytest.approx(int8_forced_logprobs(paths, sources, texts), abs=1e-5)  # 6 decimals printed
    apart = [abs(a - float(t.split("\t")[1])) for a, t in zip(sums, translated)]
    record_property("translate_vs_score_mean", sum(apart) / len(apart))
    record_property("translate_vs_score_max", max(apart))
    assert len(scored) == 300 and sum(apart) / len(apart) <= 1e-3, (sum(apart) / len(apart), max(apart))


def int8_forced_logprobs(paths: list, sources: list[str], texts: list[str]) -> list[float]:
    """By hand: the log-probability of each text and then EOS given its source, under the int8
    copies of the members in `paths`, every pair in one padded batch (as task=score batches it)."""
    translator = load_translator(paths, None, "int8", kernels="auto")  # as the tasks: the kernels chosen here
    pad, bos, eos = translator.pad_id, translator.bos_id, translator.eos_id
    tgt = translator.tokenizer.tgt.encode(texts)

    def rows(seqs: list[list[int]]) -> torch.Tensor:
        return pad_sequence([torch.tensor(s) for s in seqs], batch_first=True, padding_value=pad)

    src = rows(translator.tokenizer.encode_sources(sources))
    tgt_in, tgt_out = rows([[bos, *t] for t in tgt]), rows([[*t, eos] for t in tgt])
    with torch.no_grad():
        logprobs = translator.model()(src, tgt_in)  # an ensemble's: its averaged log-probabilities
    picked = logprobs.gather(-1, tgt_out[..., None]).squeeze(-1)
    return (picked * (tgt_out != pad)).double().sum(-1).tolist()
