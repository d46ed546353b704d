"""The config checks that must come before any part of a run is built, each failure naming its key.

Most values are checked by the constructor that takes them (TranslationDataModule, TokenizerOptions,
the searches, the callbacks): those stop a run when the part is built, before any data work. What
is left here cannot wait for its constructor:
- `optim.*` (RULES, until the optim group has a schema of its own: the model, module and trainer
  groups are checked by the schema, transformer_mt/schema): the optimizer and its schedule are built
  only inside `trainer.fit`; torch's own messages (`Invalid learning rate: -1`) name no key;
- the device and precision asked for against this machine (`check_device`);
- the dashboard's decoder layer against the model: the callback meets the model only in `fit`.
- `data.max_len` against `model.max_positions`: the data knows nothing of the model, and a pair
  the model cannot take would stop training only when its batch comes.
- `data.packed` on a GPU against what torch's varlen kernel takes (`check_packed`): elsewhere
  packed attention falls back to the exact reference, slower than plain padding.
"""

import torch
from omegaconf import DictConfig, OmegaConf

from transformer_mt.errors import ConfigError
from transformer_mt.model import TransformerConfig, attention
from transformer_mt.validate import check, integer, number

_ABSENT = object()

RULES = [  # key, test, what it must be, null allowed: the optim group's, until it has a schema of its own
    ("optim.optimizer.lr", number(0.0, low_open=True), "a number > 0", True),  # null: optim=finetune's (settle)
    ("optim.optimizer.weight_decay", number(0.0), "a number >= 0", False),
    ("optim.scheduler.warmup_steps", integer(1), "an integer >= 1", False),
]


def check_config(cfg: DictConfig, groups: tuple[str, ...]) -> None:
    """Check the RULES keys of `groups` (e.g. ("module", "trainer")) that the config has, and with
    "trainer" the device and precision asked for."""
    for key, ok, what, nullable in RULES:
        if key.split(".")[0] not in groups:
            continue
        value = OmegaConf.select(cfg, key, default=_ABSENT)
        if value is not _ABSENT:
            check(key, value, ok, what, nullable)
    if "trainer" in groups:
        check_device(cfg.trainer, bool(OmegaConf.select(cfg, "optim.optimizer.fused", default=False)))


def check_corpus_named(cfg: DictConfig) -> None:
    """A task that reads its corpus (the first of data.corpora) needs a data preset with one:
    data=checkpoint (task=evaluate's default, the checkpoint's own data) has none."""
    if cfg.data.get("from_checkpoint"):
        raise ConfigError(f"data=checkpoint is task=evaluate's data (a checkpoint's own); task={cfg.task.name} names "
                          "its corpus: data=NAME (toy, multi30k, files, ...)")


def check_dashboard_layer(cfg: DictConfig, architecture: dict) -> None:
    """callbacks.dashboard.attention_layer must be one of the model's decoder layers."""
    layer = OmegaConf.select(cfg, "callbacks.dashboard.attention_layer", default=None)
    layers = architecture["num_decoder_layers"]
    if isinstance(layer, int) and not -layers <= layer < layers:
        raise ConfigError(f"callbacks.dashboard.attention_layer={layer}: the model has {layers} decoder layers "
                          f"(0 to {layers - 1}, or -1 for the last)")


def check_max_len(data: DictConfig, architecture: dict) -> None:
    """The training pairs data.max_len keeps must fit the model: a side of data.max_len tokens is a
    sequence of at most data.max_len positions (the source with its EOS, the target with BOS or EOS)."""
    max_len = data.get("max_len")
    positions = architecture.get("max_positions", TransformerConfig.max_positions)
    if isinstance(max_len, int) and isinstance(positions, int) and max_len > positions:
        raise ConfigError(f"data.max_len={max_len} keeps training pairs of up to {max_len} tokens a side, more than "
                          f"model.max_positions={positions}: lower data.max_len to {positions} or raise "
                          "model.max_positions")


def check_device(trainer: DictConfig, fused: bool = False) -> None:
    """An accelerator that is not there, or a precision it cannot do, stops the run before any data
    work (Lightning would say so only after the data is prepared, or not at all). fused: whether
    the optimizer is a fused one."""
    accelerator, precision = str(trainer.get("accelerator", "auto")), str(trainer.get("precision", "32-true"))
    if accelerator in ("gpu", "cuda") and not torch.cuda.is_available():
        ddp = str(trainer.get("strategy", "")).startswith("ddp")  # trainer=ddp: processes on the CPU are ddp_cpu
        raise ConfigError(f"trainer.accelerator={accelerator}: this machine has no GPU that torch can use "
                          f"(torch.cuda.is_available() is False); use {'trainer=ddp_cpu' if ddp else 'trainer=cpu'}")
    gpu = on_gpu(trainer)
    if precision in ("16", "16-mixed", "16-true", "half") and not gpu:
        raise ConfigError(f"trainer.precision={precision}: float16 needs a GPU; on the CPU use bf16-mixed or 32-true")
    clip = trainer.get("gradient_clip_val") or 0
    if precision in ("16", "16-mixed") and clip and fused:
        raise ConfigError(f"trainer.gradient_clip_val={clip} with trainer.precision={precision}: a fused optimizer "
                          "(optim.optimizer.fused=true) unscales float16 gradients inside its step, after clipping; "
                          "use bf16-mixed or optim.optimizer.fused=false")
    if precision.startswith("bf16") and gpu and not torch.cuda.is_bf16_supported():
        raise ConfigError(f"trainer.precision={precision}: this GPU ({torch.cuda.get_device_name()}) has no "
                          "bfloat16; use 16-mixed or 32-true")


def on_gpu(trainer: DictConfig) -> bool:
    """Whether the run trains on a GPU (trainer.accelerator gpu, cuda, or auto with one there)."""
    return torch.cuda.is_available() and str(trainer.get("accelerator", "auto")) in ("gpu", "cuda", "auto")


def check_packed(cfg: DictConfig) -> None:
    """data.packed=true on a GPU needs torch's varlen kernel as `model.attention.packed_attention`
    calls it: fp16 / bf16 activations and no attention dropout. Without it packed attention takes
    the exact reference (unpack, padded SDPA, pack), slower than plain padding, so the run stops
    here with the key and the reason. On a CPU packing always takes the reference (no kernel).
    Relative positions have no packed path: data.packed with model.positional=relative is refused."""
    if not OmegaConf.select(cfg, "data.packed", default=False):
        return
    if OmegaConf.select(cfg, "model.positional", default=None) == "relative":
        raise ConfigError("data.packed=true: model.positional=relative attends through distance embeddings that "
                          "no packed path takes; set data.packed=false (or another model.positional)")
    if not on_gpu(cfg.trainer):
        return
    precision = str(OmegaConf.select(cfg, "trainer.precision", default="32-true"))
    dtype = torch.bfloat16 if precision.startswith("bf16") else torch.float16 if precision.startswith(
        ("16", "half")) else torch.float32
    dropout = OmegaConf.select(cfg, "model.attention_dropout", default=0.0) or 0.0
    if attention.varlen_attn is None:
        reason = f"torch {torch.__version__} has no varlen_attn taking window_size= (torch.nn.attention.varlen)"
    elif dtype not in attention.VARLEN_DTYPES:
        reason = f"trainer.precision={precision}: the kernel takes bf16 or fp16"
    elif dropout:
        reason = f"model.attention_dropout={dropout}: the kernel has no attention dropout"
    else:
        return
    raise ConfigError(f"data.packed=true: torch's varlen attention kernel cannot run ({reason}), and packed "
                      "attention without it is slower than padding; set data.packed=false")


# the callbacks a training run needs (conf/callbacks_always.yaml, in every callbacks= option), and what for
NEEDED_CALLBACKS = {
    "model_checkpoint": "checkpoints/best.ckpt, which the test evaluates",
    "last_checkpoint": "checkpoints/last.ckpt, the stop on Ctrl-C and SIGTERM, and the resume",
    "step_budget": "the final validation of a trainer.max_steps stop inside an epoch",
    "step_meter": "tokens per second (train/tokens_per_sec, metrics.json's tokens_per_sec)",
    "timer": "the training time (metrics.json's train_seconds, trainer.max_time)",
    "rng_state": "the RNG states in checkpoints (a resume equal to an uninterrupted run)",
}


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
