"""The checks of a run that need more than its config, before any part of it is built, each failure
naming its key (the config's own values and the rules between its groups are the schema's,
transformer_mt/schema, checked right after composition):
- the device and precision asked for against this machine (`check_device`), and data.packed on a
  GPU against what torch's varlen kernel takes (`check_packed`): elsewhere packed attention falls
  back to the exact reference, slower than plain padding;
- against the model the run builds (from the config, a checkpoint or model.init_from's folder): the
  dashboard's decoder layer (the callback meets the model only in `fit`), and `data.max_len`
  against `model.max_positions` (a pair the model cannot take would stop training only when its
  batch comes).
"""

import torch
from omegaconf import DictConfig, OmegaConf

from transformer_mt.errors import ConfigError
from transformer_mt.model import TransformerConfig, attention


def check_config(cfg: DictConfig) -> None:
    """The device and precision asked for, against this machine (the values themselves passed the schema)."""
    check_device(cfg.trainer, bool(OmegaConf.select(cfg, "optim.optimizer.fused", default=False)))


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
    (Relative positions, which have no packed path, the schema refuses: schema/between_groups.py.)"""
    if not OmegaConf.select(cfg, "data.packed", default=False):
        return
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
