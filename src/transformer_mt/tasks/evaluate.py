"""task=evaluate: decode and score a checkpoint on a split with the same code as validation/test.

Its data is `data=checkpoint` (conf/data/checkpoint.yaml, task=evaluate's default): the data the
checkpoint was trained on (it records its resolved data config), with that preset's split and batch
budget (null: the checkpoint's) and how this machine reads data (`data.num_workers`,
`data.num_proc`, `data.pad_to_multiple`, the cache). `data=NAME` or an experiment preset evaluates
on that corpus instead; a split that differs from the checkpoint's is then scored as asked, after a
warning that says so.
"""

import logging
from pathlib import Path

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from transformer_mt.checkpoints.files import checkpoint_paths
from transformer_mt.checkpoints.loading import describe_corpus
from transformer_mt.errors import DataError
from transformer_mt.tasks.runs.build import build_trainer
from transformer_mt.tasks.runs.config_checks import device_refusal
from transformer_mt.tasks.runs.outputs import named_sets, print_summary, tokenized_bleu_extra, write_results
from transformer_mt.training.from_checkpoint import load_module
from transformer_mt.validate import refuse

log = logging.getLogger(__name__)


def data_config(cfg: DictConfig, record: dict | None, path: Path) -> DictConfig:
    """The data to evaluate on: data=checkpoint's (the checkpoint's record, with the preset's keys
    over it where they are not null), or the data preset the config names."""
    if not cfg.data.get("from_checkpoint"):
        return cfg.data
    if record is None:
        raise DataError(f"ckpt_path={path} records no data config (an older checkpoint): name the data to "
                          "evaluate on (data=NAME)")
    data = OmegaConf.create(record["config"])
    for key, value in cfg.data.items():
        if key != "from_checkpoint" and value is not None:
            data[key] = value
    log.info("data: the checkpoint's, %s", describe_corpus(record["config"]))
    return data


def run(cfg: DictConfig) -> dict:
    refuse(device_refusal(cfg))
    trainer = build_trainer(cfg, with_logger=False)
    paths = checkpoint_paths(cfg)
    path = paths[0]
    module = load_module(paths, cfg.decoding, cfg.quantize, cfg.kernels)  # an ensemble's: every member evaluates
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
