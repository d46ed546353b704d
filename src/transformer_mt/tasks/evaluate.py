"""task=evaluate: decode and score a checkpoint on a split with the same code as validation/test."""

import logging
from pathlib import Path

from hydra.utils import instantiate
from omegaconf import DictConfig

from transformer_mt.errors import ConfigError
from transformer_mt.evaluation.metrics import tokenized_lowercased_bleu
from transformer_mt.tasks.common import build_trainer, checkpoint_path, print_summary, read_checkpoint, write_results
from transformer_mt.training import TranslationModule

log = logging.getLogger(__name__)


def load_module(path: Path) -> TranslationModule:
    """A TranslationModule and its tokenizer from a checkpoint, loaded with weights_only=True."""
    read_checkpoint(path)  # a clear error for an unreadable file before Lightning tries
    module = TranslationModule.load_from_checkpoint(path, map_location="cpu", weights_only=True)
    if module.tokenizer is None:
        raise ConfigError(f"ckpt_path={path}: the checkpoint has no tokenizer")
    return module.eval()


def run(cfg: DictConfig) -> dict:
    path = checkpoint_path(cfg)
    module = load_module(path)
    module.set_decoding(cfg.decoding)
    datamodule = instantiate(cfg.data)
    datamodule.set_vocabularies(module.tokenizer)
    trainer = build_trainer(cfg, with_logger=False, with_callbacks=False)
    trainer.test(module, datamodule=datamodule, verbose=False)
    if not trainer.is_global_zero:
        return {}
    results = module.eval_results["test"]
    split = cfg.data.split
    results = {**results, "metrics": {k.replace("test/", f"{split}/"): v for k, v in results["metrics"].items()}}
    extra = {"checkpoint": str(path), "split": split, "decoding": module.hparams.decoding}
    if cfg.task.get("tokenized_bleu"):
        scores = tokenized_lowercased_bleu([r[3] for r in results["rows"]], [r[2] for r in results["rows"]])
        extra[f"{split}/bleu_tok_lc"] = scores["bleu_tok_lc"]
        extra["bleu_tok_lc_signature"] = scores["bleu_tok_lc_signature"] + " (13a-tokenized, lowercased)"
    metrics = write_results(Path(cfg.paths.output_dir), split, results, extra)
    print_summary(f"evaluate {path.name} on {split}", metrics, results["rows"])
    return metrics
