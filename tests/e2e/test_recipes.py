"""The versioned recipes of conf/experiment/: each composes, and multi30k_recipe runs end to end
(training, averaging at the end, the averaged checkpoint tested with its beam settings) on a
folder laid out like Multi30k, written here from the toy corpus."""

from pathlib import Path

import pytest
import torch

from tests.helpers import ROOT, compose_config
from transformer_mt.data.toy import ToyCorpus
from transformer_mt.tasks import run
from transformer_mt.tasks.average import epoch_checkpoints

PRESETS = sorted(str(p.relative_to(ROOT / "conf" / "experiment").with_suffix(""))
                 for p in (ROOT / "conf" / "experiment").rglob("*.yaml"))


def test_presets_are_found():
    assert {"multi30k_recipe", "multi30k_small", "ablation/heads"} <= set(PRESETS)


@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_composes_into_a_train_run(tmp_path, preset):
    cfg = compose_config(tmp_path, [f"experiment={preset}"])
    assert cfg.task.name == "train" and cfg.model.d_model % cfg.model.heads == 0


def write_multi30k_layout(folder: Path) -> None:
    """{train,val,test2016}.{en,de}: the file names conf/data/multi30k.yaml reads."""
    corpus = ToyCorpus(num_train=400, num_val=12, num_test=12, seed=3)
    folder.mkdir(parents=True)
    for split, name in (("train", "train"), ("val", "val"), ("test", "test2016")):
        text = corpus.load(split)
        (folder / f"{name}.en").write_text("".join(s + "\n" for s in text.src))
        (folder / f"{name}.de").write_text("".join(t + "\n" for t in text.tgt))


@pytest.mark.slow
def test_multi30k_recipe_trains_averages_and_tests_the_average(tmp_path):
    write_multi30k_layout(tmp_path / "data" / "multi30k")
    out = tmp_path / "run"
    cfg = compose_config(out, ["experiment=multi30k_recipe", f"paths.data_dir={tmp_path / 'data'}",
                               "trainer.max_epochs=3"])
    metrics = run(cfg)

    # the recipe's model: 4 + 4 post-norm layers, d_model 128, d_ff 256, every embedding shared
    # (no output bias, no final norm): per encoder layer 4 (128^2 + 128) attention + 2 (128 x 256)
    # + 256 + 128 feed-forward + 2 x 256 norm parameters = 132,480; per decoder layer 198,784 (two
    # attentions, three norms); plus 128 per vocabulary entry (2,605,056 with Multi30k's 10,000)
    state = torch.load(out / "checkpoints" / "average.ckpt", weights_only=True)
    vocab = next(v.shape[0] for k, v in state["state_dict"].items() if k.endswith("embed.weight"))
    assert metrics["num_parameters"] == 4 * 132_480 + 4 * 198_784 + 128 * vocab
    assert state["hyper_parameters"]["model"]["dropout"] == 0.2  # chosen on val (the README's study)

    # fewer epochs than average_last_n (10): all of them are averaged, and the average is tested
    epochs = epoch_checkpoints(out)
    assert len(epochs) == 3 and state["averaged_from"] == [str(p) for p in epochs]
    assert metrics["tested_checkpoint"] == str(out / "checkpoints" / "average.ckpt")
    assert metrics["decoding"]["beam_size"] == 5 and metrics["decoding"]["length_penalty"] == 1.0
    assert metrics["bleu_tok_lc_signature"].startswith("nrefs:1|case:lc|")
    assert 0.0 <= metrics["test/bleu_tok_lc"] <= 100.0 and metrics["epochs"] == 3
