"""What a resume (`ckpt_path=` with task=train) can and cannot honour of a changed config, each said
in one line before any data work (check_resume), and of its data when it is read (check_resumed_data).

- the model: a full checkpoint (not a weights-only one) of the same architecture, or refused.
- `optim.*`: refused. A resume continues the checkpoint's optimizer and schedule (their states:
  Adam's moments, the step count, the base learning rate), so a new learning rate, warm-up or
  optimizer would be silently ignored, or honoured halfway; fine-tune the weights in a new run with
  `model.init_from=` instead.
- `trainer.max_steps` / `trainer.max_epochs`: honoured: the run trains on from the checkpoint's step
  and epoch to the budget; said, and said when the checkpoint has reached it already.
- `data.tokenizer.*`: the checkpoint's vocabularies are the run's, so a value other than the
  checkpoint's is ignored: said.
- the training data: other data is refused, another data.max_tokens warned (check_resumed_data).
- `callbacks.*`: a callback with state that the checkpoint has none for (one added since) starts
  fresh: said. (One the checkpoint has state for but this run lacks: Lightning says so itself.)
"""

import logging
from dataclasses import fields
from pathlib import Path

from lightning.pytorch.callbacks import Callback
from omegaconf import DictConfig

from transformer_mt.checkpoints.loading import describe_corpus
from transformer_mt.config import plain
from transformer_mt.errors import ConfigError, DataError
from transformer_mt.model import TransformerConfig
from transformer_mt.tasks.runs.init_from import architecture

log = logging.getLogger(__name__)

# optimizer keys that choose an implementation, not the arithmetic: a resume may change them
IMPLEMENTATION_KEYS = frozenset({"fused", "foreach", "capturable", "differentiable"})


def check_resume(cfg: DictConfig, checkpoint: dict, path: Path) -> None:
    """Refuse what a resume from `checkpoint` cannot honour, and say what it honours (see the
    module): a full checkpoint of the same model, its optimizer and schedule, the budget, the
    vocabularies. (The training data is compared when it is read: check_resumed_data.)"""
    check_resumable(path, checkpoint, architecture(cfg.model))
    refuse_another_optimizer(cfg, checkpoint, path)
    say_budget(cfg, checkpoint, path)
    ignored = changed_tokenizer_keys(cfg, checkpoint)
    if ignored:
        log.warning("%s: ignored on a resume, which keeps the vocabularies of ckpt_path=%s", ", ".join(ignored), path)


def check_resumable(path: Path, checkpoint: dict, arch: dict) -> None:
    """Resuming needs a full checkpoint of the same model."""
    if "optimizer_states" not in checkpoint or "loops" not in checkpoint:
        raise DataError(f"ckpt_path={path}: a weights-only checkpoint (no optimizer state, no training "
                          "position); it can be evaluated, translated or averaged, not resumed: resume from "
                          "checkpoints/last.ckpt")
    defaults = {f.name: f.default for f in fields(TransformerConfig)}
    saved = {**defaults, **checkpoint["hyper_parameters"]["model"]}  # keys added since it was written: defaults
    current = {**defaults, **arch}
    for key in sorted(set(saved) | set(current)):
        if saved.get(key) != current.get(key):
            raise ConfigError(f"model.{key}={current.get(key)}, but ckpt_path={path} was trained with "
                              f"model.{key}={saved.get(key)}: resume with the checkpoint's model settings")


def check_resumed_data(checkpoint: dict, path: Path, data: DictConfig, fingerprints: dict) -> None:
    """A resumed run trains on the training data of its checkpoint; another batch size is warned about
    (the batches, and so their order, are not those the uninterrupted run would have had)."""
    record = checkpoint["hyper_parameters"].get("data")
    if not record:
        return
    if record["fingerprints"].get("train") != fingerprints.get("train"):
        raise DataError(f"ckpt_path={path} was trained on other data ({describe_corpus(record['config'])}), "
                        f"not on {describe_corpus(plain(data))}: resume with the data options of that run (its "
                        "config.yaml)")
    old, new = record["config"].get("max_tokens"), data.get("max_tokens")
    if old is not None and old != new:
        log.warning("data.max_tokens %s -> %s: ckpt_path=%s was trained with data.max_tokens=%s, so the batches are "
                    "cut and ordered differently from here on (and a mid-epoch resume skips or repeats some pairs of "
                    "that epoch)", old, new, path, old)


def say_fresh_callbacks(callbacks: list[Callback], checkpoint: dict, path: Path) -> None:
    """A callback with state that the checkpoint has none for (one added since): said, it starts fresh."""
    saved = set(checkpoint.get("callbacks") or {})
    for callback in callbacks:
        stateful = type(callback).state_dict is not Callback.state_dict
        if stateful and callback.state_key not in saved:
            log.warning("%s: ckpt_path=%s has no state for it (a callback added since): it starts fresh",
                        type(callback).__name__, path)


def changed_tokenizer_keys(cfg: DictConfig, checkpoint: dict) -> list[str]:
    """The data.tokenizer keys whose value differs from the checkpoint's (its data record), as `key=value`."""
    record = (checkpoint["hyper_parameters"].get("data") or {}).get("config") or {}
    was, now = record.get("tokenizer") or {}, plain(cfg.data.get("tokenizer")) or {}
    return [f"data.tokenizer.{key}={now[key]}" for key in sorted(now) if key in was and was[key] != now[key]]


def refuse_another_optimizer(cfg: DictConfig, checkpoint: dict, path: Path) -> None:
    """One line naming the first optim.* key whose value differs from the checkpoint's, and every
    other one after `also` (another schedule is more than its learning rate)."""
    saved = checkpoint["hyper_parameters"]
    differ = []
    for part in ("optimizer", "scheduler"):
        was, now = plain(saved.get(part)) or {}, plain(cfg.module.get(part)) or {}
        differ += [(f"optim.{part}.{key}", now.get(key), was.get(key))
                   for key in sorted((set(was) | set(now)) - IMPLEMENTATION_KEYS) if was.get(key) != now.get(key)]
    if differ:
        (key, now, was), others = differ[0], differ[1:]
        also = "; also " + ", ".join(f"{k}={n} (trained with {w})" for k, n, w in others) if others else ""
        raise ConfigError(
            f"{key}={now}, but ckpt_path={path} was trained with {key}={was}{also}: a resume continues its optimizer "
            "and schedule and cannot take another; resume with its optim settings, or fine-tune its weights in a new "
            f"run (model.init_from={path})")


def say_budget(cfg: DictConfig, checkpoint: dict, path: Path) -> None:
    """Where the resumed run stops: trainer.max_steps / max_epochs, from the checkpoint's step and the
    epochs it has trained (its fit loop's processed epochs; an end-of-epoch checkpoint's epoch is done)."""
    step = int(checkpoint.get("global_step", 0))
    progress = ((checkpoint.get("loops") or {}).get("fit_loop") or {}).get("epoch_progress") or {}
    epoch = int(progress.get("total", {}).get("processed", checkpoint.get("epoch", 0)))
    max_steps, max_epochs = cfg.trainer.get("max_steps", -1), cfg.trainer.get("max_epochs")
    budget = ", ".join(part for part in (f"trainer.max_steps={max_steps}" if max_steps not in (None, -1) else "",
                                         f"trainer.max_epochs={max_epochs}" if max_epochs is not None else "") if part)
    done = (max_steps not in (None, -1) and step >= max_steps) or (max_epochs is not None and epoch >= max_epochs)
    if done:
        log.warning("ckpt_path=%s is at step %d after %d epochs: it has reached %s already, so nothing is trained; "
                    "raise the budget to train on", path, step, epoch, budget)
    else:
        log.info("resuming ckpt_path=%s at step %d after %d epochs; training on to %s", path, step, epoch,
                 budget or "no budget")
