"""task=train: fit with validation BLEU, keep the best checkpoint, test it, write metrics.json.

Before any data work the config is checked (tasks/checks.py) and the Trainer is built, so a wrong
key, a missing GPU or an impossible precision stops the run at once. Every split the run will read
is then prepared and checked, so a bad test sentence stops it before training, not after.
"""

import logging
import sys
import time
from dataclasses import fields
from pathlib import Path

import lightning as L
from hydra.utils import instantiate
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.utilities.exceptions import SIGTERMException
from omegaconf import DictConfig, open_dict

from transformer_mt.data.tokenizer import Vocabularies
from transformer_mt.errors import ConfigError, DataError
from transformer_mt.model import TransformerConfig
from transformer_mt.tasks.average import epoch_checkpoints, write_average
from transformer_mt.tasks.checks import check_config
from transformer_mt.tasks.common import (
    build_trainer,
    checkpoint_path,
    checkpoint_tokenizer,
    describe_corpus,
    print_summary,
    read_checkpoint,
    tokenized_bleu_extra,
    write_results,
)
from transformer_mt.training import TranslationModule
from transformer_mt.training.checkpointing import LastCheckpoint
from transformer_mt.training.module import architecture, plain

log = logging.getLogger(__name__)

RUN_SPECIFIC_DATA_KEYS = ("cache_dir", "run_dir")  # not part of what the data was
SIGTERM_EXIT_STATUS = 143  # 128 + SIGTERM, what a shell reports for a process SIGTERM stopped


def build_module(cfg: DictConfig, vocab: Vocabularies, data: dict | None = None) -> TranslationModule:
    """cfg.module plus what only the data knows: vocabulary sizes, special ids, the data record."""
    ids = vocab.special_ids()
    return instantiate(cfg.module, src_vocab_size=vocab.src.vocab_size, tgt_vocab_size=vocab.tgt.vocab_size,
                       pad_id=ids["pad_id"], bos_id=ids["bos_id"], eos_id=ids["eos_id"], tokenizer=vocab.to_dict(),
                       data=data, _recursive_=False)


def start_from_marian(cfg: DictConfig, datamodule) -> dict:
    """model.init_from: the Marian folder's architecture replaces cfg.model's (dropouts stay), its
    vocabulary becomes the run's; returns its weights as our state_dict."""
    from transformer_mt.interop.marian import read_marian

    keys, state, vocab = read_marian(Path(cfg.model.init_from))
    with open_dict(cfg):
        cfg.model.update(keys)
    log.info("model.init_from=%s: %s", cfg.model.init_from, ", ".join(f"{k}={v}" for k, v in keys.items()))
    datamodule.set_vocabularies(vocab)
    return state


def data_record(cfg: DictConfig, fingerprints: dict) -> dict:
    """What a checkpoint keeps of the data it was trained on."""
    config = {k: v for k, v in plain(cfg.data).items() if k not in RUN_SPECIFIC_DATA_KEYS}
    return {"config": config, "fingerprints": fingerprints}


def check_resumable(path: Path, checkpoint: dict, cfg: DictConfig, fingerprints: dict) -> None:
    """Resuming needs a full checkpoint of the same model trained on the same data."""
    if "optimizer_states" not in checkpoint or "loops" not in checkpoint:
        raise ConfigError(f"ckpt_path={path}: a weights-only checkpoint (no optimizer state, no training "
                          "position); it can be evaluated, translated or averaged, not resumed: resume from "
                          "checkpoints/last.ckpt")
    defaults = {f.name: f.default for f in fields(TransformerConfig)}
    saved = {**defaults, **checkpoint["hyper_parameters"]["model"]}  # keys added since it was written: defaults
    current = {**defaults, **architecture(cfg.model)}
    for key in sorted(set(saved) | set(current)):
        if saved.get(key) != current.get(key):
            raise ConfigError(f"model.{key}={current.get(key)}, but ckpt_path={path} was trained with "
                              f"model.{key}={saved.get(key)}: resume with the checkpoint's model settings")
    record = checkpoint["hyper_parameters"].get("data")
    if record and record["fingerprints"].get("train") != fingerprints.get("train"):
        raise DataError(f"ckpt_path={path} was trained on other data ({describe_corpus(record['config'])}), not "
                        f"on {describe_corpus(plain(cfg.data))}: resume with the data options of that run "
                        "(its config.yaml)")


def stopped_by_sigterm(trainer: L.Trainer) -> None:
    """One line saying where training stopped and what to resume from; exit status 143."""
    last = next((c.path for c in trainer.callbacks if isinstance(c, LastCheckpoint)), None)
    if trainer.is_global_zero:
        held = (f"{last} holds step {read_checkpoint(last)['global_step']}: resume with ckpt_path={last}"
                if last is not None and last.is_file() else "no checkpoint was written")
        print(f"stopped by SIGTERM at step {trainer.global_step}; {held}", file=sys.stderr)
    sys.exit(SIGTERM_EXIT_STATUS)


def keep_earlier_curves(output_dir: Path) -> None:
    """Resumed into its own run directory, a run keeps the curves logged so far: Lightning's CSV
    logger would delete csv/metrics.csv, so it is renamed to csv/metrics.partN.csv first."""
    curves = output_dir / "csv" / "metrics.csv"
    if curves.is_file():
        part = 1 + sum(1 for _ in curves.parent.glob("metrics.part*.csv"))
        curves.rename(curves.with_name(f"metrics.part{part}.csv"))


def log_config(trainer: L.Trainer, cfg: DictConfig, module: TranslationModule) -> None:
    """The resolved run config, the parameter count and the run directory as every logger's
    hyper-parameters (wandb config, TensorBoard hparams, csv/hparams.yaml)."""
    config = {key: plain(cfg[key]) for key in cfg if key != "hydra"}
    params = {**config, "num_parameters": module.model.num_parameters(), "run_dir": str(cfg.paths.output_dir)}
    for logger in trainer.loggers:
        logger.log_hyperparams(params)


def run(cfg: DictConfig) -> dict:
    check_config(cfg, ("seed", "model", "module", "optim", "trainer", "data"))
    check_averaging(cfg)
    if cfg.get("ckpt_path"):
        keep_earlier_curves(Path(cfg.paths.output_dir))
    trainer = build_trainer(cfg)
    L.seed_everything(cfg.seed, workers=True)
    output_dir = Path(cfg.paths.output_dir)
    datamodule = instantiate(cfg.data)
    resume, checkpoint, init_weights = None, None, None
    if cfg.model.get("init_from"):  # fine-tune a Marian model: its architecture, vocabulary and weights
        init_weights = start_from_marian(cfg, datamodule)
    if cfg.get("ckpt_path"):  # resume: the checkpoint's vocabularies and weights, not new ones
        resume, init_weights = checkpoint_path(cfg), None
        checkpoint = read_checkpoint(resume)
        datamodule.set_vocabularies(Vocabularies.from_dict(checkpoint_tokenizer(checkpoint)))
    vocab = datamodule.prepare_vocabularies()
    fingerprints = datamodule.fingerprints()
    if checkpoint is not None:
        check_resumable(resume, checkpoint, cfg, fingerprints)
    datamodule.check_splits(["train", "val", cfg.data.split])
    module = build_module(cfg, vocab, data_record(cfg, fingerprints))
    if init_weights is not None:
        module.model.load_state_dict(init_weights)
    log_config(trainer, cfg, module)
    started = time.perf_counter()
    try:
        try:
            trainer.fit(module, datamodule=datamodule, ckpt_path=resume)
        except SIGTERMException:
            stopped_by_sigterm(trainer)
        train_seconds = time.perf_counter() - started
        checkpoint_cb = next((c for c in trainer.checkpoint_callbacks if isinstance(c, ModelCheckpoint)), None)
        best = checkpoint_cb.best_model_path if checkpoint_cb is not None and checkpoint_cb.best_model_path else None
        if best is None and not trainer.fast_dev_run:
            log.warning("no best checkpoint in this run (no validation ran): testing the final weights")
        tested = average_at_end(cfg, trainer) or best
        trainer.test(module, datamodule=datamodule, ckpt_path=tested, weights_only=True if tested else None,
                     verbose=False)
    finally:
        finish_wandb()
    if not trainer.is_global_zero:
        return {}
    best_score = checkpoint_cb.best_model_score if best else None
    extra = {
        **module.eval_results.get("val", {}).get("metrics", {}),  # the last validation
        "val/bleu_best": float(best_score) if best_score is not None else None,
        "best_checkpoint": best,
        "tested_checkpoint": tested,
        "num_parameters": module.model.num_parameters(),
        "tokens_per_sec": module.tokens_per_sec() * trainer.world_size,
        "train_seconds": round(train_seconds, 1),
        "epochs": trainer.current_epoch,
        "steps": trainer.global_step,
        "decoding": module.hparams.decoding,
    }
    results = module.eval_results["test"]
    if cfg.task.get("tokenized_bleu"):
        extra.update(tokenized_bleu_extra("test", results["rows"]))
    metrics = write_results(output_dir, "test", results, extra)
    print_summary(f"test ({cfg.data.split} split)", metrics, results["rows"])
    return metrics


def check_averaging(cfg: DictConfig) -> None:
    """task.average_last_n needs the epoch checkpoints it averages: one line before any work."""
    n = cfg.task.get("average_last_n") or 0
    if not isinstance(n, int) or n < 0:
        raise ConfigError(f"task.average_last_n={n}: must be a whole number >= 0 (0: no averaging)")
    if not n:
        return
    epochs = (cfg.get("callbacks") or {}).get("epoch_checkpoint")
    keep = epochs.get("save_top_k") if epochs else None
    if not isinstance(keep, int) or (keep != -1 and keep < n):
        raise ConfigError(f"task.average_last_n={n} averages the last {n} checkpoints of callbacks.epoch_checkpoint,"
                          " which must be on and keep at least that many (save_top_k: -1 or >= N)")


def average_at_end(cfg: DictConfig, trainer: L.Trainer) -> str | None:
    """With task.average_last_n=N: checkpoints/average.ckpt, the mean of the last N epoch
    checkpoints (fewer, with a warning, if fewer were written), written by rank 0; its path."""
    n = cfg.task.get("average_last_n") or 0
    if not n:
        return None
    run_dir = Path(cfg.paths.output_dir)
    output = run_dir / "checkpoints" / "average.ckpt"
    if trainer.is_global_zero:
        paths = epoch_checkpoints(run_dir)[-n:]
        if not paths:
            raise ConfigError(f"task.average_last_n={n}: no epoch checkpoints in {run_dir}/checkpoints/epochs")
        if len(paths) < n:
            log.warning("task.average_last_n=%d, but the run wrote %d epoch checkpoints: averaging those", n,
                        len(paths))
        write_average(paths, output)
    trainer.strategy.barrier()
    return str(output)


def finish_wandb() -> None:
    """Close a wandb run if one was started (logger=wandb), also when training failed."""
    try:
        import wandb
    except ImportError:
        return
    if wandb.run is not None:
        wandb.finish()
