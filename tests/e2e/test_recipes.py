"""The versioned recipes of conf/experiment/: each composes, and multi30k_recipe runs end to end
(training, averaging at the end, the averaged checkpoint tested with its beam settings) on a
folder laid out like Multi30k, written here from the toy corpus."""

from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from tests.helpers import ROOT, compose_config, run_py
from transformer_mt.checkpoints.averaging import epoch_checkpoints
from transformer_mt.data.toy import ToyCorpus
from transformer_mt.tasks import run

PRESETS = sorted(str(p.relative_to(ROOT / "conf" / "experiment").with_suffix(""))
                 for p in (ROOT / "conf" / "experiment").rglob("*.yaml"))


def test_presets_are_found():
    assert {"multi30k_recipe", "multi30k_small", "ablation/heads"} <= set(PRESETS)


# the presets that choose a task of their own (the others train)
PRESET_TASKS = {"multi30k/distilled": "distill", "multi30k/student_cpu": "distill"}


@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_composes_into_a_run_of_its_task(tmp_path, preset):
    cfg = compose_config(tmp_path, [f"experiment={preset}"])
    assert cfg.task.name == PRESET_TASKS.get(preset, "train") and cfg.model.d_model % cfg.model.heads == 0


def test_the_cpu_student_is_the_distilled_recipe_with_six_encoder_layers_one_decoder_layer_and_the_shipped_teacher(
        tmp_path):
    """experiment=multi30k/student_cpu: model=student_cpu's depth at the recipe's widths, taught by the shipped
    model on the original pairs too; every other key as experiment=multi30k/distilled's. model=student_cpu
    alone: small's widths at that depth."""
    composed = compose_config(tmp_path / "a", ["experiment=multi30k/student_cpu"])
    assert list(composed.task.teacher) == [str(ROOT / "experiments" / "multi30k" / "multi30k_en_de.ckpt")]
    student = OmegaConf.to_container(composed)
    distilled = OmegaConf.to_container(compose_config(tmp_path / "b", ["experiment=multi30k/distilled"]))
    shape = compose_config(tmp_path / "c", ["model=student_cpu"]).model
    assert (shape.num_encoder_layers, shape.num_decoder_layers) == (6, 1)
    assert student["model"] == {**distilled["model"], "num_encoder_layers": 6, "num_decoder_layers": 1}
    assert student["task"] == {**distilled["task"], "originals_weight": 1.0, "teacher": student["task"]["teacher"]}
    for group in ("data", "optim", "trainer", "decoding", "module"):
        assert student[group] == distilled[group], group
    small = compose_config(tmp_path / "d", ["model=small"]).model
    assert {**OmegaConf.to_container(small), "num_encoder_layers": 6, "num_decoder_layers": 1} == (
        OmegaConf.to_container(shape))


@pytest.mark.parametrize("preset", [p for p in PRESETS if p.startswith("ablation/") and p != "ablation/base"])
def test_every_ablation_row_runs_with_three_seeds(tmp_path, preset):
    cfg = compose_config(tmp_path, [f"experiment={preset}"])
    assert cfg.hydra.sweeper.params.seed == "1234,1235,1236" and len(cfg.hydra.sweeper.params) == 2


@pytest.mark.parametrize("preset", [p for p in PRESETS if p.startswith("ablation/") and p != "ablation/base"])
def test_every_ablation_sweep_has_its_own_config_as_a_row(tmp_path, preset):
    """task=report takes the row whose settings equal the sweep's config as the base: each preset's
    config value of its swept key is one of the swept values (ablation/dk once left d_k null)."""
    cfg = compose_config(tmp_path, [f"experiment={preset}"])
    (key, values), = ((k, v) for k, v in cfg.hydra.sweeper.params.items() if k != "seed")
    assert str(OmegaConf.select(cfg, key)) in values.split(",")


def test_seeds_on_the_command_line_replace_the_presets(tmp_path):
    """`-m experiment=ablation/positions seed=7`: 4 rows x 1 seed (jobs run task=report: seconds)."""
    (tmp_path / "empty" / "0").mkdir(parents=True)
    result = run_py("-m", "experiment=ablation/positions", "seed=7", "task=report", f"task.sweep_dir={tmp_path}/empty",
                    f"hydra.sweep.dir={tmp_path}/sweep")
    assert result.returncode == 0, result.stderr[-2000:]
    jobs = sorted(p.name for p in (tmp_path / "sweep").iterdir() if p.is_dir())
    assert jobs == ["0", "1", "2", "3"]
    overrides = [(tmp_path / "sweep" / job / ".hydra" / "overrides.yaml").read_text() for job in jobs]
    assert all("seed=7" in text for text in overrides)


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

    # fewer epochs than last_n (10): all of them are averaged, and the average is tested
    epochs = epoch_checkpoints(out)
    assert len(epochs) == 3 and state["averaged_from"] == [str(p) for p in epochs]
    assert metrics["tested_checkpoint"] == str(out / "checkpoints" / "average.ckpt")
    assert metrics["decoding"]["beam_size"] == 5 and metrics["decoding"]["length_norm"]["alpha"] == 1.0
    assert metrics["bleu_tok_lc_signature"].startswith("nrefs:1|case:lc|")
    assert 0.0 <= metrics["test/bleu_tok_lc"] <= 100.0 and metrics["epochs"] == 3


def test_multi30k_recipe_is_a_step_budget_of_the_published_run():
    """The same command trains the same model on any CPU: 8,811 steps, no time budget."""
    cfg = compose_config(Path("unused"), ["experiment=multi30k_recipe"])
    assert cfg.trainer.max_steps == 8811 and cfg.trainer.max_time is None


def test_a_step_budget_inside_an_epoch_validates_and_averages_the_final_weights(tmp_path):
    """A run stopped by trainer.max_steps inside an epoch ends as one stopped by trainer.max_time:
    its final weights are validated, kept as an epoch checkpoint and averaged (Lightning alone
    would stop without validating, and the last partial epoch would be trained for nothing)."""
    metrics = run(compose_config(tmp_path, ["data.corpora.toy.num_train=400", "data.corpora.toy.num_val=10",
                                            "data.corpora.toy.num_test=5", "data.max_tokens=512",
                                            "trainer.max_epochs=5", "trainer.max_steps=19", "task.last_n=2"]))
    curve = (tmp_path / "plots" / "curves.csv").read_text().splitlines()
    validated = [int(line.split(",")[0]) for line in curve if ",val/loss," in line]
    per_epoch = validated[0]  # the first validation ends the first epoch
    assert per_epoch < 19 < 2 * per_epoch  # so step 19 falls inside the second epoch
    assert metrics["steps"] == 19 and metrics["epochs"] == 2 and validated == [per_epoch, 19]
    epochs = epoch_checkpoints(tmp_path)
    assert [torch.load(p, weights_only=True)["global_step"] for p in epochs] == [per_epoch, 19]
    state = torch.load(tmp_path / "checkpoints" / "average.ckpt", weights_only=True)
    assert state["averaged_from"] == [str(p) for p in epochs]


# ---------------------------------------------------------------------- the paper's recipes
PAPER = {  # preset: (target language, d_model, dropout, steps, checkpoints averaged, vocabulary size)
    "paper/wmt14_en_de_base": ("de", 512, 0.1, 100_000, 5, 37_000),
    "paper/wmt14_en_de_big": ("de", 1024, 0.3, 300_000, 20, 37_000),
    "paper/wmt14_en_fr_big": ("fr", 1024, 0.1, 300_000, 20, 32_000),
}
PAPER_TOKENS_PER_UPDATE = 25_000  # source (and target) tokens per update in the paper


@pytest.mark.parametrize("preset", sorted(PAPER))
def test_the_papers_recipes_hold_its_settings(tmp_path, preset):
    lang, d_model, dropout, steps, averaged, vocab = PAPER[preset]
    cfg = compose_config(tmp_path, [f"experiment={preset}"])
    [corpus] = cfg.data.corpora.values()  # data=wmt14's or data=wmt14_en_fr's
    assert (corpus.path, corpus.src_lang, corpus.tgt_lang) == ("wmt14", "en", lang)
    assert (cfg.model.d_model, cfg.model.dropout, cfg.module.label_smoothing) == (d_model, dropout, 0.1)
    assert cfg.model.d_ff == 4 * d_model and cfg.model.num_encoder_layers == cfg.model.num_decoder_layers == 6
    assert cfg.data.tokenizer.vocab_size == vocab and cfg.data.tokenizer.joint
    adam = cfg.optim.optimizer
    assert (adam.lr, list(adam.betas), adam.eps) == (1.0, [0.9, 0.98], 1e-9)
    assert cfg.optim.scheduler._target_.endswith("noam") and cfg.optim.scheduler.warmup_steps == 4000
    assert cfg.tokens_per_update == PAPER_TOKENS_PER_UPDATE and cfg.trainer.max_steps == steps
    assert cfg.task.last_n == averaged and cfg.callbacks.epoch_checkpoint.train_time_interval.minutes == 10
    beam = cfg.decoding
    assert (beam.beam_size, beam.length_norm._target_, beam.length_norm.alpha) == (
        4, "transformer_mt.decoding.GnmtLength", 0.6)
    assert (beam.options.max_len_a, beam.options.max_len_b) == (1.0, 50)
    assert cfg.task.tokenized_bleu == "compound"


@pytest.mark.parametrize("size", ["base", "big"])
def test_the_throughput_presets_scale_the_papers_batch_and_keep_the_rest(tmp_path, size):
    """experiment=throughput/*: 100,000 tokens an update (4x the paper's) in one batch per card,
    the noam factor doubled, a quarter of the paper's steps, the step on 16 shapes with CUDA graphs
    and a padded vocabulary; the model, data, regularization and averaging are the paper's."""
    from transformer_mt.tasks.runs.start import UpdatePlan, update_plan

    paper = compose_config(tmp_path, [f"experiment=paper/wmt14_en_de_{size}", "trainer=gpu"])
    fast = compose_config(tmp_path, [f"experiment=throughput/wmt14_en_de_{size}", "trainer=gpu"])
    assert (fast.tokens_per_update, fast.data.max_tokens, fast.data.shape_grid) == (100_000, 100_000, 16)
    assert update_plan(fast, 1, 1) == UpdatePlan(processes=1, accumulation=1, batch_tokens=100_000)
    assert fast.optim.optimizer.lr == 2 * paper.optim.optimizer.lr and fast.trainer.max_steps * 4 == PAPER[
        f"paper/wmt14_en_de_{size}"][3]
    assert (fast.module.compile, fast.module.compile_mode, fast.module.shape_grid, fast.module.vocab_multiple) == (
        True, "reduce-overhead", 16, 128)
    same = ("model", "decoding", "task")
    assert all(OmegaConf.to_container(fast[key]) == OmegaConf.to_container(paper[key]) for key in same)
    assert fast.data.tokenizer == paper.data.tokenizer and fast.data.corpora == paper.data.corpora
    assert (paper.tokens_per_update, paper.data.shape_grid, paper.module.vocab_multiple) == (25_000, None, 1)


def write_wmt_layout(folder: Path, tgt_lang: str) -> None:
    """A local copy laid out as the hub's wmt14 (train / validation / test, a `translation` column of
    {lang: text}), written with save_to_disk from the toy corpus."""
    import datasets

    corpus = ToyCorpus(num_train=400, num_val=12, num_test=12, seed=3)
    splits = {}
    for split, name in (("train", "train"), ("val", "validation"), ("test", "test")):
        text = corpus.load(split)
        splits[name] = datasets.Dataset.from_dict({"translation": [{"en": s, tgt_lang: t}
                                                                   for s, t in zip(text.src, text.tgt)]})
    datasets.DatasetDict(splits).save_to_disk(str(folder))


@pytest.mark.slow
@pytest.mark.parametrize("preset", sorted(PAPER))
def test_the_papers_recipes_run_a_few_steps(tmp_path, preset):
    """On a WMT-shaped folder, with a tiny model: the update plan, the checkpoints kept by time, their
    average tested with beam 4 and GNMT's length penalty, and the paper's tokenized BLEU."""
    write_wmt_layout(tmp_path / "wmt14", PAPER[preset][0])
    corpus = "wmt14" if PAPER[preset][0] == "de" else "wmt14_en_fr"  # the corpus data=wmt14 (_en_fr) names
    steps = 6
    cfg = compose_config(tmp_path / "run", [
        f"experiment={preset}", f"data.corpora.{corpus}.path={tmp_path / 'wmt14'}", "data.tokenizer.vocab_size=200",
        "data.max_tokens=256", "model=tiny", "trainer.precision=32-true", f"trainer.max_steps={steps}",
        "trainer.limit_val_batches=2", "callbacks.epoch_checkpoint.train_time_interval.minutes=0.001",
        "trainer.devices=1", "tokens_per_update=1000"])
    metrics = run(cfg)
    # tokens_per_update=1000 on one device of at most 256 tokens: 4 batches of 250 a step
    assert (metrics["accumulate_grad_batches"], metrics["batch_tokens"]) == (4, 250)
    assert torch.load(tmp_path / "run" / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == steps
    kept = epoch_checkpoints(tmp_path / "run")
    averaged = torch.load(tmp_path / "run" / "checkpoints" / "average.ckpt", weights_only=True)["averaged_from"]
    assert len(kept) >= 2 and averaged == [str(p) for p in kept[-PAPER[preset][4]:]]
    assert metrics["tested_checkpoint"] == str(tmp_path / "run" / "checkpoints" / "average.ckpt")
    assert metrics["decoding"]["length_norm"]["_target_"].endswith("GnmtLength")
    assert 0.0 <= metrics["test/bleu_tok_compound"] <= 100.0
    assert metrics["bleu_tok_compound_signature"].endswith("(13a-tokenized, compounds split as get_ende_bleu.sh)")


def test_the_ablation_base_trains_four_epochs_and_validates_once_at_the_end(tmp_path):
    """The budget read off the base row's curve (experiments/ablations/README.md)."""
    cfg = compose_config(tmp_path, ["experiment=ablation/heads"])
    assert cfg.trainer.max_epochs == 4 and cfg.trainer.check_val_every_n_epoch == 4
    cfg = compose_config(tmp_path, ["experiment=ablation/heads", "trainer.max_epochs=6"])
    assert cfg.trainer.check_val_every_n_epoch == 6
