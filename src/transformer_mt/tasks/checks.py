"""Config values checked before any work, each failure naming its key: `model.heads=0` stops the
run at once with `model.heads=0: must be an integer >= 1`, not with a ZeroDivisionError later."""

from collections.abc import Callable

import torch
from omegaconf import DictConfig, OmegaConf

from transformer_mt.errors import ConfigError
from transformer_mt.model import TransformerConfig
from transformer_mt.training.module import architecture

_ABSENT = object()


def integer(low: int) -> Callable[[object], bool]:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= low


def number(low: float, high: float | None = None, low_open: bool = False, high_open: bool = False):
    def ok(v) -> bool:
        if not isinstance(v, int | float) or isinstance(v, bool) or v != v:
            return False
        above = v > low if low_open else v >= low
        below = high is None or (v < high if high_open else v <= high)
        return above and below
    return ok


PROBABILITY = (number(0.0, 1.0, high_open=True), "a number in [0, 1)")
RULES: list[tuple[str, Callable[[object], bool], str, bool]] = [  # key, test, what it must be, null allowed
    ("seed", integer(0), "an integer >= 0", False),
    ("model.num_encoder_layers", integer(1), "an integer >= 1", False),
    ("model.num_decoder_layers", integer(1), "an integer >= 1", False),
    ("model.d_model", integer(1), "an integer >= 1", False),
    ("model.d_ff", integer(1), "an integer >= 1", False),
    ("model.heads", integer(1), "an integer >= 1", False),
    ("model.d_k", integer(1), "an integer >= 1 or null", True),
    ("model.dropout", *PROBABILITY, False),
    ("model.attention_dropout", *PROBABILITY, False),
    ("model.activation_dropout", *PROBABILITY, False),
    ("model.max_positions", integer(2), "an integer >= 2", False),
    ("module.label_smoothing", *PROBABILITY, False),
    ("module.max_nonfinite_steps", integer(1), "an integer >= 1", False),
    ("optim.optimizer.lr", number(0.0, low_open=True), "a number > 0", False),
    ("optim.optimizer.weight_decay", number(0.0), "a number >= 0", False),
    ("optim.scheduler.warmup_steps", integer(1), "an integer >= 1", False),
    ("trainer.max_epochs", integer(-1), "an integer >= -1 (-1: no limit) or null", True),
    ("trainer.max_steps", integer(-1), "an integer >= -1 (-1: no limit)", False),
    ("trainer.accumulate_grad_batches", integer(1), "an integer >= 1", False),
    ("trainer.gradient_clip_val", number(0.0), "a number >= 0 or null", True),
    ("trainer.check_val_every_n_epoch", integer(1), "an integer >= 1 or null", True),
    ("data.max_tokens", integer(1), "an integer >= 1", False),
    ("data.eval_max_tokens", integer(1), "an integer >= 1 or null", True),
    ("data.max_len", integer(1), "an integer >= 1", False),
    ("data.max_len_ratio", number(1.0), "a number >= 1 or null", True),
    ("data.tokenizer.vocab_size", integer(5), "an integer >= 5", False),
]


def check_config(cfg: DictConfig, groups: tuple[str, ...]) -> None:
    """Check the RULES keys of `groups` (e.g. ("model", "trainer")) that the config has, then what
    only their combination can tell: the model's shape, and the device and precision asked for."""
    for key, ok, what, nullable in RULES:
        if key.split(".")[0] not in groups:
            continue
        value = OmegaConf.select(cfg, key, default=_ABSENT)
        if value is _ABSENT or (value is None and nullable):
            continue
        if not ok(value):
            raise ConfigError(f"{key}={value!r}: must be {what}")
    if "model" in groups:
        try:
            TransformerConfig(src_vocab_size=1, tgt_vocab_size=1, **architecture(cfg.model))
        except TypeError as err:  # a key that is no model option
            raise ConfigError(f"model: {err}".replace("TransformerConfig.__init__() got an ", "")) from None
        layer = OmegaConf.select(cfg, "callbacks.dashboard.attention_layer", default=None)
        layers = cfg.model.num_decoder_layers
        if isinstance(layer, int) and not -layers <= layer < layers:
            raise ConfigError(f"callbacks.dashboard.attention_layer={layer}: the model has {layers} decoder layers "
                              f"(0 to {layers - 1}, or -1 for the last)")
    if "trainer" in groups:
        check_device(cfg.trainer)


def check_device(trainer: DictConfig) -> None:
    """An accelerator that is not there, or a precision it cannot do, stops the run before any data
    work (Lightning would say so only after the data is prepared, or not at all)."""
    accelerator, precision = str(trainer.get("accelerator", "auto")), str(trainer.get("precision", "32-true"))
    cuda = torch.cuda.is_available()
    if accelerator in ("gpu", "cuda") and not cuda:
        raise ConfigError(f"trainer.accelerator={accelerator}: this machine has no GPU that torch can use "
                          "(torch.cuda.is_available() is False); use trainer=cpu")
    on_gpu = cuda and accelerator in ("gpu", "cuda", "auto")
    if precision in ("16", "16-mixed", "16-true", "half") and not on_gpu:
        raise ConfigError(f"trainer.precision={precision}: float16 needs a GPU; on the CPU use bf16-mixed or 32-true")
    if precision.startswith("bf16") and on_gpu and not torch.cuda.is_bf16_supported():
        raise ConfigError(f"trainer.precision={precision}: this GPU ({torch.cuda.get_device_name()}) has no "
                          "bfloat16; use 16-mixed or 32-true")
