"""task=evaluate: decode and score a checkpoint on a split with the same code as validation/test.

Without `data=` / `data.*` / `experiment=` on the command line, the data is the checkpoint's (it
records its resolved data config); `data.split` and `data.eval_max_tokens` may still be set, and
how the data is read (`data.num_workers`, `data.num_proc`, `data.pad_to_multiple`) is always this
command's, not the training machine's. With data chosen on the command line, a split that differs
from the checkpoint's is scored as asked, after a warning that says so.
"""

import logging
from pathlib import Path

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from transformer_mt.checkpoints.loading import checkpoint_paths, describe_corpus, load_module
from transformer_mt.config import overridden_keys
from transformer_mt.tasks.runs.build import build_trainer
from transformer_mt.tasks.runs.config_checks import check_config
from transformer_mt.tasks.runs.outputs import named_sets, print_summary, tokenized_bleu_extra, write_results

log = logging.getLogger(__name__)

EVALUATION_DATA_KEYS = ("split", "eval_max_tokens", "num_workers", "num_proc", "pad_to_multiple", "cache_dir",
                        "run_dir", "progress")
# how this machine reads the data (not what the data is): always this command's, never the checkpoint's
HOW_DATA_KEYS = ("num_workers", "num_proc", "pad_to_multiple", "cache_dir", "run_dir", "progress")


def chose_data(keys: set[str]) -> bool:
    """Whether the command line chose the data (not only how to evaluate it)."""
    return any(k in ("data", "experiment", "paths.data_dir") or
               (k.startswith("data.") and k.split(".")[1] not in EVALUATION_DATA_KEYS) for k in keys)


def data_config(cfg: DictConfig, record: dict | None, path: Path) -> DictConfig:
    """The checkpoint's data config, unless the command line chose data or the checkpoint has none."""
    keys = overridden_keys()
    if record is None or chose_data(keys):
        if record is None:
            log.warning("ckpt_path=%s records no data config (an older checkpoint): using %s", path,
                        describe_corpus(OmegaConf.to_container(cfg.data, resolve=True)))
        return cfg.data
    data = OmegaConf.create(record["config"])
    for key in EVALUATION_DATA_KEYS:
        if key in HOW_DATA_KEYS or f"data.{key}" in keys:
            data[key] = cfg.data[key]
    log.info("data: the checkpoint's, %s", describe_corpus(record["config"]))
    return data


def run(cfg: DictConfig) -> dict:
    check_config(cfg, ("trainer",))
    trainer = build_trainer(cfg, with_logger=False, with_callbacks=False)
    paths = checkpoint_paths(cfg)
    path = paths[0]
    module = load_module(paths, cfg.decoding, cfg.quantize)  # an ensemble's: every member evaluates
    record = module.hparams.data
    data = data_config(cfg, record, path)
    datamodule = instantiate(data, vocabularies=module.tokenizer)
    split = data.split
    if record is not None and datamodule.fingerprint(split) != record["fingerprints"].get(split):
        given = describe_corpus(OmegaConf.to_container(data, resolve=True))
        log.warning("ckpt_path=%s was trained on other data (%s); scoring the %s split of %s as asked", path,
                    describe_corpus(record["config"]), split, given)
    datamodule.check_splits([split], module.model.config.max_positions)
    trainer.test(module, datamodule=datamodule, verbose=False)
    if not trainer.is_global_zero:
        return {}
    results = module.results["test"].renamed("test", split)
    extra = {"checkpoint": str(path) if len(paths) == 1 else [str(p) for p in paths], "split": split,
             "decoding": module.hparams.decoding, "quantize": module.quantize}
    sets = named_sets(module.results, "test", split)
    if cfg.task.get("tokenized_bleu"):
        extra.update(tokenized_bleu_extra(split, results.rows, cfg.task.tokenized_bleu, sets))
    metrics = write_results(Path(cfg.paths.output_dir), split, results, extra, sets)
    print_summary(f"evaluate {path.name} on {split}", metrics, results.rows)
    return metrics
