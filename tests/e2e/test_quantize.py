"""quantize=int8: evaluate and translate decode with an int8 copy of the linear layers,
at nearly the BLEU of the fp32 model, leaving the model and the checkpoint as they were."""

import pytest
import torch

from tests.helpers import compose_config
from transformer_mt.data.toy import ToyCorpus
from transformer_mt.decoding import GreedySearch
from transformer_mt.errors import ConfigError, find_user_error
from transformer_mt.inference.members import load_translator
from transformer_mt.model.quantize import RowScaledInt8Linear
from transformer_mt.tasks import run

pytestmark = pytest.mark.slow


def test_int8_evaluate_and_translate_keep_the_bleu_and_the_checkpoint(toy_run, tmp_path, record_property):
    """The int8 copy scores within 1.0 test BLEU of the fp32 model (3 lines of 300; -0.07 / 0.00 /
    -0.23 measured on a Zen 5 EPYC under its native / avx2 / default numeric profiles: docs/layout.md,
    "Bounds that hold on any CPU"), and evaluate and translate give it the same translations in
    batches of any size (all 300 sentences in one batch, or a few at a time): each row of a batch is
    quantized with its own scale. The checkpoint is left as it was."""
    out, metrics = toy_run
    ckpt = out / "checkpoints" / "best.ckpt"
    before = ckpt.read_bytes()
    evaluated = run(compose_config(tmp_path / "eval", ["task=evaluate", f"ckpt_path={ckpt}", "quantize=int8",
                                                       "data.eval_max_tokens=100000"]))
    assert evaluated["quantize"] == "int8"
    record_property("int8_minus_fp32_bleu", evaluated["test/bleu"] - metrics["test/bleu"])
    assert abs(evaluated["test/bleu"] - metrics["test/bleu"]) <= 1.0, (evaluated["test/bleu"], metrics["test/bleu"])
    int8_lines = (tmp_path / "eval" / "test.translations.txt").read_text().splitlines()
    (tmp_path / "in.txt").write_text("\n".join(ToyCorpus().load("test").src) + "\n")
    for max_tokens in (100000, 64):
        overrides = ["task=translate", f"ckpt_path={ckpt}", f"task.input={tmp_path}/in.txt",
                     f"task.output={tmp_path}/out{max_tokens}.txt", "quantize=int8", f"task.max_tokens={max_tokens}"]
        run(compose_config(tmp_path / f"translate{max_tokens}", overrides))
        got = (tmp_path / f"out{max_tokens}.txt").read_text().splitlines()
        assert len(got) == 300 and got == int8_lines, max_tokens
    assert ckpt.read_bytes() == before


def test_the_int8_copy_is_what_decodes_and_the_model_is_untouched(toy_run, record_property):
    out, _ = toy_run
    ckpt = out / "checkpoints" / "best.ckpt"
    translator = load_translator([ckpt], GreedySearch(), "int8")
    weights = {k: v.clone() for k, v in translator.models[0].state_dict().items()}
    int8 = translator.model()
    linears = [m for m in translator.models[0].modules() if type(m) is torch.nn.Linear]
    quantized = [m for m in int8.modules() if isinstance(m, RowScaledInt8Linear)]
    assert len(quantized) == len(linears) > 0 and not any(type(m) is torch.nn.Linear for m in int8.modules())
    assert all(torch.equal(v, translator.models[0].state_dict()[k]) for k, v in weights.items())
    src = translator.tokenizer.encode_sources(ToyCorpus().load("test").src[:16])
    src = torch.nn.utils.rnn.pad_sequence([torch.tensor(s) for s in src], batch_first=True,
                                          padding_value=translator.pad_id)
    tgt = torch.full((src.size(0), 1), translator.bos_id)
    with torch.no_grad():
        exact, approx = translator.models[0](src, tgt), int8(src, tgt)
    record_property("int8_logit_error", float((exact - approx).abs().max() / exact.abs().max()))
    assert not torch.equal(exact, approx)  # int8 products really ran ...
    # ... close to the fp32 ones: 1.5% / 1.6% / 1.8% of the largest logit under the three profiles
    assert (exact - approx).abs().max() < 0.05 * exact.abs().max()
    search = translator.search
    expected = search(int8, src, translator.bos_id, translator.eos_id)
    texts = translator.tokenizer.tgt.decode([n[0].tokens for n in expected])
    assert [n[0][0] for n in translator.translate(src)] == texts
    assert translator.model() is int8  # built once


def test_an_unknown_quantization_is_one_line(toy_run, tmp_path):
    out, _ = toy_run
    with pytest.raises(Exception) as err:  # as run.py sees it: the ConfigError that it prints as one line
        run(compose_config(tmp_path / "run", ["task=evaluate", f"ckpt_path={out}/checkpoints/best.ckpt",
                                              "quantize=int4"]))
    assert isinstance(find_user_error(err.value), ConfigError), err.value
    assert "quantize='int4': must be none or int8" in str(find_user_error(err.value))
