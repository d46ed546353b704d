"""The build step of a training run: first settle what it starts from, then build each part once.

    trainer = build_trainer(cfg)                             # tasks/common.py
    start = settle(cfg)                                      # architecture, vocabularies, weights
    datamodule = build_datamodule(start)
    module = build_module(start, datamodule)

A run starts from nothing (random weights, vocabularies trained on its data or read from the
cache or `data.tokenizer.file`), from a Marian folder (`model.init_from`: its architecture,
vocabulary and weights) or from a checkpoint it resumes (`ckpt_path`: its vocabularies; its
weights, optimizer and position are restored by `trainer.fit(ckpt_path=...)`). Each part is
constructed once with everything it needs; nothing is assigned to, re-set on or loaded into it
afterwards, and `cfg` is never changed.

`cfg.model` is the one group that is no constructor call: it says which model to build (the
Transformer's keys, `TransformerConfig` without the vocabulary sizes) and `init_from`, where its
weights start. The build step turns it into the module's `model` argument. With `init_from`, the
run is built from `start.config`: a copy of `cfg` whose model group holds the Marian folder's
architecture, so that `${model.d_model}` (the noam schedule's) means the model that is built.
"""

import copy
import logging
import math
from dataclasses import dataclass, fields
from pathlib import Path

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, open_dict

from transformer_mt.data.datamodule import TranslationDataModule
from transformer_mt.data.tokenizer import Vocabularies
from transformer_mt.errors import ConfigError, DataError
from transformer_mt.model import TransformerConfig
from transformer_mt.tasks.checks import check_model
from transformer_mt.tasks.common import checkpoint_path, checkpoint_tokenizer, describe_corpus, read_checkpoint
from transformer_mt.training import TranslationModule
from transformer_mt.training.module import plain

log = logging.getLogger(__name__)

RUN_SPECIFIC_DATA_KEYS = ("cache_dir", "run_dir")  # not part of what the data was


@dataclass(frozen=True)
class Start:
    """What a training run starts from, settled before any part of it is built."""

    config: DictConfig  # the run's config, its model group as built (a Marian folder's architecture)
    vocabularies: Vocabularies | None  # a checkpoint's or a Marian folder's; None: made from data.tokenizer
    weights: dict[str, torch.Tensor] | None  # a Marian folder's; None: random, or the resumed checkpoint's
    resume: Path | None  # the checkpoint training resumes from
    resumed_data: dict | None  # what that checkpoint was trained on (its data record)

    @property
    def architecture(self) -> dict:
        """The Transformer's keys of the model that is built (but the vocabulary sizes)."""
        return architecture(self.config.model)


def architecture(model: DictConfig | dict) -> dict:
    """The Transformer's keys of a model config (conf/model): all but `init_from`, which says where
    the weights come from, not what the model is."""
    return {key: value for key, value in plain(model).items() if key != "init_from"}


def settle(cfg: DictConfig) -> Start:
    """Read what the run starts from (a Marian folder, a checkpoint to resume) and check that the
    model can be built, before any data work."""
    config, vocabularies, weights = cfg, None, None
    if cfg.model.get("init_from"):  # fine-tune a Marian model: its architecture, vocabulary and weights
        from transformer_mt.interop.marian import read_marian

        marian, weights, vocabularies = read_marian(Path(cfg.model.init_from))
        log.info("model.init_from=%s: %s", cfg.model.init_from, ", ".join(f"{k}={v}" for k, v in marian.items()))
        config = with_model(cfg, marian)
    check_model(architecture(config.model))
    if not cfg.get("ckpt_path"):
        return Start(config, vocabularies, weights, None, None)
    path = checkpoint_path(cfg)  # resume: the checkpoint's vocabularies and weights, not new ones
    checkpoint = read_checkpoint(path)
    check_resumable(path, checkpoint, architecture(config.model))
    return Start(config, Vocabularies.from_dict(checkpoint_tokenizer(checkpoint)), None, path,
                 checkpoint["hyper_parameters"].get("data"))


def with_model(cfg: DictConfig, keys: dict) -> DictConfig:
    """A copy of `cfg` whose model group has `keys` (the dropouts and init_from stay); `cfg` itself
    is not changed."""
    config = copy.deepcopy(cfg)
    with open_dict(config):
        config.model.update(keys)
    return config


def check_resumable(path: Path, checkpoint: dict, arch: dict) -> None:
    """Resuming needs a full checkpoint of the same model."""
    if "optimizer_states" not in checkpoint or "loops" not in checkpoint:
        raise ConfigError(f"ckpt_path={path}: a weights-only checkpoint (no optimizer state, no training "
                          "position); it can be evaluated, translated or averaged, not resumed: resume from "
                          "checkpoints/last.ckpt")
    defaults = {f.name: f.default for f in fields(TransformerConfig)}
    saved = {**defaults, **checkpoint["hyper_parameters"]["model"]}  # keys added since it was written: defaults
    current = {**defaults, **arch}
    for key in sorted(set(saved) | set(current)):
        if saved.get(key) != current.get(key):
            raise ConfigError(f"model.{key}={current.get(key)}, but ckpt_path={path} was trained with "
                              f"model.{key}={saved.get(key)}: resume with the checkpoint's model settings")


@dataclass(frozen=True)
class UpdatePlan:
    """How an optimizer step sees `tokens_per_update` padded tokens (per side): `processes` (devices x
    nodes) each take `accumulation` batches of at most `batch_tokens`."""

    processes: int
    accumulation: int
    batch_tokens: int


def device_count(trainer: DictConfig) -> int:
    """The processes per node `trainer.devices` asks for (an int, a list of devices, or -1 / "auto":
    every GPU, or one process on the CPU)."""
    devices, accelerator = trainer.get("devices", "auto"), str(trainer.get("accelerator", "auto"))
    if isinstance(devices, int) and devices > 0:
        return devices
    if not isinstance(devices, int | str):
        return len(devices)
    if isinstance(devices, str) and devices.isdigit() and int(devices) > 0:
        return int(devices)
    gpus = torch.cuda.device_count() if accelerator in ("auto", "gpu", "cuda") else 0
    return max(gpus, 1)


def update_plan(cfg: DictConfig) -> UpdatePlan | None:
    """With `tokens_per_update` T: accumulation A = ceil(T / (processes x data.max_tokens)) batches
    of T / (processes x A) tokens each (data.max_tokens is then the most a device takes); None without."""
    tokens = cfg.get("tokens_per_update")
    if tokens is None:
        return None
    if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 1:
        raise ConfigError(f"tokens_per_update={tokens!r}: must be an integer >= 1 or null")
    if cfg.trainer.get("accumulate_grad_batches", 1) != 1:
        raise ConfigError(f"tokens_per_update={tokens} sets the gradient accumulation: leave "
                          f"trainer.accumulate_grad_batches at 1 (it is {cfg.trainer.accumulate_grad_batches})")
    devices, nodes = device_count(cfg.trainer), int(cfg.trainer.get("num_nodes") or 1)
    accumulation = max(1, math.ceil(tokens / (devices * nodes * cfg.data.max_tokens)))
    plan = UpdatePlan(devices * nodes, accumulation, math.ceil(tokens / (devices * nodes * accumulation)))
    log.info("tokens_per_update=%d: %d device(s) x %d node(s) x %d tokens per batch x accumulation %d = %d padded "
             "tokens per optimizer step", tokens, devices, nodes, plan.batch_tokens, accumulation,
             plan.processes * plan.batch_tokens * accumulation)
    return plan


def build_datamodule(start: Start, plan: UpdatePlan | None = None) -> TranslationDataModule:
    """The data config, with the vocabularies the run starts from (None: the datamodule makes them)
    and, with an update plan, its batch budget."""
    derived = {"max_tokens": plan.batch_tokens} if plan else {}
    return instantiate(start.config.data, vocabularies=start.vocabularies, **derived)


def data_record(data: DictConfig, fingerprints: dict) -> dict:
    """What a checkpoint keeps of the data it was trained on."""
    config = {k: v for k, v in plain(data).items() if k not in RUN_SPECIFIC_DATA_KEYS}
    return {"config": config, "fingerprints": fingerprints}


def check_same_data(start: Start, fingerprints: dict) -> None:
    """A resumed run trains on the training data of its checkpoint; another batch size is warned about
    (the batches, and so their order, are not those the uninterrupted run would have had)."""
    record = start.resumed_data
    if not record:
        return
    if record["fingerprints"].get("train") != fingerprints.get("train"):
        raise DataError(f"ckpt_path={start.resume} was trained on other data ({describe_corpus(record['config'])}), "
                        f"not on {describe_corpus(plain(start.config.data))}: resume with the data options of that "
                        "run (its config.yaml)")
    old, new = record["config"].get("max_tokens"), start.config.data.get("max_tokens")
    if old is not None and old != new:
        log.warning("data.max_tokens %s -> %s: ckpt_path=%s was trained with data.max_tokens=%s, so the batches are "
                    "cut and ordered differently from here on (and a mid-epoch resume skips or repeats some pairs of "
                    "that epoch)", old, new, start.resume, old)


def build_module(start: Start, datamodule: TranslationDataModule) -> TranslationModule:
    """cfg.module, plus what the build step settled: the architecture, what the vocabularies say
    (sizes, special ids, the vocabularies themselves), the data record and the initial weights."""
    vocab, fingerprints = datamodule.vocabularies, datamodule.fingerprints()
    ids = vocab.special_ids()
    make = instantiate(start.config.module, _partial_=True, _recursive_=False)
    return make(model=start.architecture, src_vocab_size=vocab.src.vocab_size, tgt_vocab_size=vocab.tgt.vocab_size,
                pad_id=ids["pad_id"], bos_id=ids["bos_id"], eos_id=ids["eos_id"], tokenizer=vocab.to_dict(),
                data=data_record(start.config.data, fingerprints), initial_weights=start.weights)
