"""The rules between groups (RunConfig.check_together): what the keys of one group cannot be with
another's, checked right after composition with the rest of the schema, before any work: those of
every run here, a task's own keys with the rest in its class (`Task.check_run`: task=export's
weights, task=average's and task=serve's checkpoints, task=score's files). What needs more than
the config (the model a checkpoint or model.init_from holds, the machine's GPU)
is checked where that is read (tasks/runs/start.py, tasks/runs/config_checks.py)."""

from omegaconf import DictConfig, OmegaConf

from transformer_mt.errors import ConfigError
from transformer_mt.schema.task_base import Task

# the callbacks a training run needs (conf/callbacks_always.yaml, in every callbacks= option), and what for
NEEDED_CALLBACKS = {
    "model_checkpoint": "checkpoints/best.ckpt, which the test evaluates",
    "last_checkpoint": "checkpoints/last.ckpt, the stop on Ctrl-C and SIGTERM, and the resume",
    "step_budget": "the final validation of a trainer.max_steps stop inside an epoch",
    "step_meter": "tokens per second (train/tokens_per_sec, metrics.json's tokens_per_sec)",
    "timer": "the training time (metrics.json's train_seconds, trainer.max_time)",
    "rng_state": "the RNG states in checkpoints (a resume equal to an uninterrupted run)",
}


def check_between_groups(cfg: DictConfig) -> None:
    """Every rule between groups that `cfg` is subject to (a ConfigError naming the keys)."""
    if OmegaConf.select(cfg, "data.packed", default=False) and \
            OmegaConf.select(cfg, "model.positional", default=None) == "relative":
        raise ConfigError("data.packed=true: model.positional=relative attends through distance embeddings that "
                          "no packed path takes; set data.packed=false (or another model.positional)")
    tokens, accumulation = cfg.get("tokens_per_update"), OmegaConf.select(cfg, "trainer.accumulate_grad_batches")
    if tokens is not None and accumulation not in (None, 1):
        raise ConfigError(f"tokens_per_update={tokens} sets the gradient accumulation: leave "
                          f"trainer.accumulate_grad_batches at 1 (it is {accumulation})")
    kind = OmegaConf.get_type(cfg, "task")
    if not (isinstance(kind, type) and issubclass(kind, Task)):
        return
    kind.check_run(cfg)  # the task's own keys with the rest
    if kind.trains:
        check_corpus_named(cfg)
        check_derived_lr(cfg)
        check_needed_callbacks(cfg)
        check_averaging(cfg)


def check_corpus_named(cfg: DictConfig) -> None:
    """A task that reads its corpus (the first of data.corpora) needs a data preset with one:
    data=checkpoint (task=evaluate's default, the checkpoint's own data) has none."""
    if (cfg.get("data") or {}).get("from_checkpoint"):
        raise ConfigError(f"data=checkpoint is task=evaluate's data (a checkpoint's own); task={cfg.task.name} names "
                          "its corpus: data=NAME (toy, multi30k, files, ...)")


def check_derived_lr(cfg: DictConfig) -> None:
    """optim.optimizer.lr null is optim=finetune's, derived from the starting model: only with model.init_from."""
    if OmegaConf.select(cfg, "optim.optimizer.lr", default=0) is None and not cfg.model.get("init_from"):
        raise ConfigError("optim.optimizer.lr=null is optim=finetune's, derived from the starting model's peak: it "
                          "needs model.init_from (or set optim.optimizer.lr=NUMBER)")


def check_needed_callbacks(cfg: DictConfig) -> None:
    """Every callback a training run needs is in its config (every callbacks= option has them; one
    removed, `~callbacks.NAME` or null, is one line naming it)."""
    callbacks = cfg.get("callbacks") or {}
    for name, why in NEEDED_CALLBACKS.items():
        if not OmegaConf.select(callbacks, f"{name}._target_", default=None):
            raise ConfigError(f"callbacks.{name}: a training run needs it ({why}); it is in every callbacks= option "
                              "(conf/callbacks_always.yaml) and cannot be removed")


def check_averaging(cfg: DictConfig) -> None:
    """task.last_n needs the epoch checkpoints it averages: one line before any work."""
    n = cfg.task.get("last_n") or 0
    if not n:
        return
    epochs = (cfg.get("callbacks") or {}).get("epoch_checkpoint")
    keep = epochs.get("save_top_k") if epochs else None
    if not isinstance(keep, int) or (keep != -1 and keep < n):
        raise ConfigError(f"task.last_n={n} averages the last {n} checkpoints of callbacks.epoch_checkpoint,"
                          " which must be on and keep at least that many (save_top_k: -1 or >= N)")
