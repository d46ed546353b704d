"""task=train: fit with validation BLEU, keep the best checkpoint, test it, write metrics.json."""

import time
from pathlib import Path

import lightning as L
from hydra.utils import instantiate
from lightning.pytorch.callbacks import ModelCheckpoint
from omegaconf import DictConfig

from transformer_mt.data.tokenizer import Vocabularies
from transformer_mt.tasks.common import build_trainer, checkpoint_path, print_summary, read_checkpoint, write_results
from transformer_mt.training import TranslationModule


def build_module(cfg: DictConfig, vocab: Vocabularies) -> TranslationModule:
    """cfg.module plus what only the vocabularies know (their sizes, special ids)."""
    ids = vocab.special_ids()
    module = instantiate(cfg.module, src_vocab_size=vocab.src.vocab_size, tgt_vocab_size=vocab.tgt.vocab_size,
                         pad_id=ids["pad_id"], bos_id=ids["bos_id"], eos_id=ids["eos_id"], _recursive_=False)
    module.tokenizer = vocab
    return module


def run(cfg: DictConfig) -> dict:
    L.seed_everything(cfg.seed, workers=True)
    output_dir = Path(cfg.paths.output_dir)
    datamodule = instantiate(cfg.data)
    resume = None
    if cfg.get("ckpt_path"):  # resume: the checkpoint's vocabularies, not new ones
        resume = checkpoint_path(cfg)
        datamodule.set_vocabularies(Vocabularies.from_dict(read_checkpoint(resume)["tokenizer"]))
    module = build_module(cfg, datamodule.prepare_vocabularies())
    trainer = build_trainer(cfg)
    started = time.perf_counter()
    try:
        trainer.fit(module, datamodule=datamodule, ckpt_path=resume)
        train_seconds = time.perf_counter() - started
        checkpoint = next((c for c in trainer.checkpoint_callbacks if isinstance(c, ModelCheckpoint)), None)
        best = checkpoint.best_model_path if checkpoint is not None and checkpoint.best_model_path else None
        trainer.test(module, datamodule=datamodule, ckpt_path=best, weights_only=True if best else None, verbose=False)
    finally:
        finish_wandb()
    if not trainer.is_global_zero:
        return {}
    extra = {
        "val/bleu_best": float(checkpoint.best_model_score) if best else None,
        "best_checkpoint": best,
        "num_parameters": module.model.num_parameters(),
        "tokens_per_sec": module.tokens_per_sec() * trainer.world_size,
        "train_seconds": round(train_seconds, 1),
        "epochs": trainer.current_epoch,
        "steps": trainer.global_step,
        "decoding": module.hparams.decoding,
    }
    results = module.eval_results["test"]
    metrics = write_results(output_dir, "test", results, extra)
    print_summary(f"test ({cfg.data.split} split)", metrics, results["rows"])
    return metrics


def finish_wandb() -> None:
    """Close a wandb run if one was started (logger=wandb), also when training failed."""
    try:
        import wandb
    except ImportError:
        return
    if wandb.run is not None:
        wandb.finish()
