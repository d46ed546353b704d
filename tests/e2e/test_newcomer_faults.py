"""Small things a newcomer noticed (issue 48): a damaged checkpoint says how it is damaged and
names the key that gave it; the learning rate on the progress bar is not 0.000; the end-of-run
table is not cut at 80 columns in a pipe; the log says what a run does (packed batches have no
padding, subword regularization is on, one joint vocabulary); task=evaluate names the split it
scored."""

import logging

import pytest
import torch

from tests.helpers import FAST, compose_config
from transformer_mt.checkpoints.loading import read_checkpoint
from transformer_mt.errors import ConfigError
from transformer_mt.tasks import run
from transformer_mt.tasks.runs.init_from import read_init_from
from transformer_mt.tasks.runs.outputs import print_summary
from transformer_mt.training.logging_steps_bar import shown


def test_a_damaged_checkpoint_says_how_and_names_its_key(tmp_path):
    whole = tmp_path / "whole.ckpt"
    torch.save({"state_dict": {"w": torch.zeros(1000)}}, whole)
    empty, cut, other = tmp_path / "empty.ckpt", tmp_path / "cut.ckpt", tmp_path / "other.ckpt"
    empty.write_bytes(b"")
    cut.write_bytes(whole.read_bytes()[:2000])
    other.write_bytes(b"not a checkpoint at all")
    cases = [(empty, "the file is empty, 0 bytes"),
             (cut, "it is cut short: 2,000 bytes, without the end of a checkpoint"),
             (other, "23 bytes that are not a torch checkpoint")]
    for path, how in cases:
        with pytest.raises(ConfigError) as err:
            read_checkpoint(path)
        assert str(err.value) == f"ckpt_path={path}: not a readable transformer-mt checkpoint ({how})"
    with pytest.raises(ConfigError, match=rf"^model\.init_from={empty}: .*the file is empty"):
        read_init_from(empty)


def test_the_bar_shows_the_learning_rate_in_scientific_notation():
    assert shown("train/lr", 7e-4) == "7.00e-04" and shown("train/lr", 1.1e-7) == "1.10e-07"
    assert shown("train/loss", 1.5) == 1.5  # the bar's own format


def test_the_summary_in_a_pipe_is_not_cut_at_80_columns(capsys):
    path = "/a/long/folder/of/runs/" + "x" * 100 + "/checkpoints/best.ckpt"
    signature = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.4.3" * 2
    print_summary("test", {"best_checkpoint": path, "bleu_signature": signature, "test/bleu": 12.5}, ())
    out = capsys.readouterr().out  # a pipe, not a terminal
    assert path in out and signature in out


def test_the_log_says_what_the_run_does(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    run(compose_config(tmp_path / "run", [*FAST, "data.packed=true", "data.tokenizer.dropout=0.1"]))
    text = caplog.text
    assert "training a joint vocabulary (bpe" in text and "joint vocabularies" not in text
    assert "packed, no padding" in text and "% padding" not in text
    assert "BPE-dropout 0.1 (data.tokenizer.dropout)" in text


def test_evaluate_logs_the_split_it_scored(small_checkpoint, tmp_path, caplog):
    caplog.set_level(logging.INFO)
    metrics = run(compose_config(tmp_path, ["task=evaluate", f"ckpt_path={small_checkpoint}", "data.split=val"]))
    assert "val/bleu" in metrics
    assert "val: BLEU" in caplog.text and "test: BLEU" not in caplog.text


def test_the_model_summary_counts_flops(small_checkpoint):
    """Lightning's summary counts FLOPs on the module's example input (one 32-token pair): not 0."""
    from lightning.pytorch.utilities.model_summary import ModelSummary

    from transformer_mt.training.from_checkpoint import load_module

    module = load_module(small_checkpoint)
    src, tgt_in = module.example_input_array
    assert src.shape == tgt_in.shape == (1, 32)
    summary = ModelSummary(module, max_depth=1)
    assert summary.total_flops > 0


class Payload:
    """What a hostile checkpoint would carry: unpickling it would run a command."""

    def __reduce__(self):
        import os

        return os.system, ("echo unpickled",)


def test_a_checkpoint_with_python_objects_is_refused_without_inviting_weights_only_false(tmp_path):
    path = tmp_path / "payload.ckpt"
    torch.save({"state_dict": {}, "payload": Payload()}, path)
    with pytest.raises(ConfigError) as err:
        read_checkpoint(path)
    message = str(err.value)
    assert message.startswith(f"ckpt_path={path}: not a readable transformer-mt checkpoint (it holds Python objects (")
    assert message.endswith("beyond tensors and plain data, which are never unpickled here: loading them would run "
                            "their code, and a transformer-mt checkpoint holds none)")
    assert "weights_only" not in message and "Re-running" not in message
