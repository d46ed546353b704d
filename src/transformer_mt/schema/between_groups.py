"""The rules between groups (RunConfig.refusal): what the keys of one group cannot be with
another's, checked right after composition with the rest of the schema, before any work: those of
every run here, a task's own keys with the rest in its class (`Task.run_refusal`: task=export's
weights, task=average's and task=serve's checkpoints, task=score's files). What needs more than
the config (the model a checkpoint or model.init_from holds, the machine's GPU)
is asked where that is read (tasks/runs/start.py, tasks/runs/config_checks.py)."""

from omegaconf import DictConfig, OmegaConf

from transformer_mt.schema.task_base import Task
from transformer_mt.validate import Refusal, first_refusal

# the callbacks a training run needs (conf/callbacks_always.yaml, in every callbacks= option), and what for
NEEDED_CALLBACKS = {
    "model_checkpoint": "checkpoints/best.ckpt, which the test evaluates",
    "last_checkpoint": "checkpoints/last.ckpt, the stop on Ctrl-C and SIGTERM, and the resume",
    "step_budget": "the final validation of a trainer.max_steps stop inside an epoch",
    "step_meter": "tokens per second (train/tokens_per_sec, metrics.json's tokens_per_sec)",
    "timer": "the training time (metrics.json's train_seconds, trainer.max_time)",
    "rng_state": "the RNG states in checkpoints (a resume equal to an uninterrupted run)",
}


def packed_relative(cfg: DictConfig) -> Refusal:
    """Packed batches have no path for relative positions' distance embeddings."""
    if OmegaConf.select(cfg, "data.packed", default=False) and \
            OmegaConf.select(cfg, "model.positional", default=None) == "relative":
        return ("data.packed=true: model.positional=relative attends through distance embeddings that no packed "
                "path takes; set data.packed=false (or another model.positional)")
    return None


def tokens_with_accumulation(cfg: DictConfig) -> Refusal:
    """tokens_per_update sets the accumulation: trainer.accumulate_grad_batches stays 1."""
    tokens, accumulation = cfg.get("tokens_per_update"), OmegaConf.select(cfg, "trainer.accumulate_grad_batches")
    if tokens is not None and accumulation not in (None, 1):
        return (f"tokens_per_update={tokens} sets the gradient accumulation: leave trainer.accumulate_grad_batches "
                f"at 1 (it is {accumulation})")
    return None


def corpus_named(cfg: DictConfig) -> Refusal:
    """A task that reads its corpus (the first of data.corpora) needs a data preset with one:
    data=checkpoint (task=evaluate's default, the checkpoint's own data) has none."""
    if (cfg.get("data") or {}).get("from_checkpoint"):
        return (f"data=checkpoint is task=evaluate's data (a checkpoint's own); task={cfg.task.name} names its "
                "corpus: data=NAME (toy, multi30k, files, ...)")
    return None


def derived_lr(cfg: DictConfig) -> Refusal:
    """optim.optimizer.lr null is optim=finetune's, derived from the starting model: only with model.init_from."""
    if OmegaConf.select(cfg, "optim.optimizer.lr", default=0) is None and not cfg.model.get("init_from"):
        return ("optim.optimizer.lr=null is optim=finetune's, derived from the starting model's peak: it needs "
                "model.init_from (or set optim.optimizer.lr=NUMBER)")
    return None


def needed_callbacks(cfg: DictConfig) -> Refusal:
    """Every callback a training run needs is in its config (every callbacks= option has them; one
    removed, `~callbacks.NAME` or null, is one line naming it)."""
    callbacks = cfg.get("callbacks") or {}
    for name, why in NEEDED_CALLBACKS.items():
        if not OmegaConf.select(callbacks, f"{name}._target_", default=None):
            return (f"callbacks.{name}: a training run needs it ({why}); it is in every callbacks= option "
                    "(conf/callbacks_always.yaml) and cannot be removed")
    return None


def averaging(cfg: DictConfig) -> Refusal:
    """task.last_n needs the epoch checkpoints it averages: one line before any work."""
    n = cfg.task.get("last_n") or 0
    epochs = (cfg.get("callbacks") or {}).get("epoch_checkpoint")
    keep = epochs.get("save_top_k") if epochs else None
    if n and (not isinstance(keep, int) or (keep != -1 and keep < n)):
        return (f"task.last_n={n} averages the last {n} checkpoints of callbacks.epoch_checkpoint, which must be on "
                "and keep at least that many (save_top_k: -1 or >= N)")
    return None


def clip_with_fused_fp16(cfg: DictConfig) -> Refusal:
    """A fused optimizer unscales float16 gradients inside its step, after Lightning clipped them."""
    precision = str(OmegaConf.select(cfg, "trainer.precision", default="32-true"))
    clip = OmegaConf.select(cfg, "trainer.gradient_clip_val", default=0) or 0
    if precision in ("16", "16-mixed") and clip and OmegaConf.select(cfg, "optim.optimizer.fused", default=False):
        return (f"trainer.gradient_clip_val={clip} with trainer.precision={precision}: a fused optimizer "
                "(optim.optimizer.fused=true) unscales float16 gradients inside its step, after clipping; use "
                "bf16-mixed or optim.optimizer.fused=false")
    return None


EVERY_RUN = (packed_relative, tokens_with_accumulation)
# and a task that trains (Task.trains)
TRAINING = (corpus_named, derived_lr, needed_callbacks, averaging, clip_with_fused_fp16)


def between_groups_refusal(cfg: DictConfig) -> Refusal:
    """The first rule between groups that `cfg` breaks (its one line naming the keys), or None: every
    run's, then the task's own (`Task.run_refusal`), then a training task's."""
    rules = list(EVERY_RUN)
    task = OmegaConf.get_type(cfg, "task")
    if isinstance(task, type) and issubclass(task, Task):
        rules.append(task.run_refusal)
        rules.extend(TRAINING if task.trains else ())
    return first_refusal(rules, cfg)
