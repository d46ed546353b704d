"""The rules of a run that need more than its config, asked before any part of it is built, each
refusal naming its key (the config's own values and the rules between its groups are the schema's,
transformer_mt/schema, checked right after composition):
- the machine's (`machine_refusal`): the device and precision asked for against this machine, and
  data.packed on a GPU against what torch's varlen kernel takes (elsewhere packed attention falls
  back to the exact reference, slower than plain padding);
- the model's (`model_refusal`), against the model the run builds (from the config, a checkpoint or
  model.init_from's folder): the dashboard's decoder layer (the callback meets the model only in
  `fit`), and `data.max_len` against `model.max_positions` (a pair the model cannot take would stop
  training only when its batch comes).
"""

import torch
from omegaconf import DictConfig, OmegaConf

from transformer_mt.model import TransformerConfig, attention
from transformer_mt.validate import Refusal, first_refusal


def dashboard_layer(cfg: DictConfig, architecture: dict) -> Refusal:
    """callbacks.dashboard.attention_layer must be one of the model's decoder layers."""
    layer = OmegaConf.select(cfg, "callbacks.dashboard.attention_layer", default=None)
    layers = architecture["num_decoder_layers"]
    if isinstance(layer, int) and not -layers <= layer < layers:
        return (f"callbacks.dashboard.attention_layer={layer}: the model has {layers} decoder layers "
                f"(0 to {layers - 1}, or -1 for the last)")
    return None


def max_len(cfg: DictConfig, architecture: dict) -> Refusal:
    """The training pairs data.max_len keeps must fit the model: a side of data.max_len tokens is a
    sequence of at most data.max_len positions (the source with its EOS, the target with BOS or EOS)."""
    kept = cfg.data.get("max_len")
    positions = architecture.get("max_positions", TransformerConfig.max_positions)
    if isinstance(kept, int) and isinstance(positions, int) and kept > positions:
        return (f"data.max_len={kept} keeps training pairs of up to {kept} tokens a side, more than "
                f"model.max_positions={positions}: lower data.max_len to {positions} or raise model.max_positions")
    return None


def model_refusal(cfg: DictConfig, architecture: dict) -> Refusal:
    """The first rule the model of `architecture` breaks with the config `cfg`, or None."""
    return first_refusal((dashboard_layer, max_len), cfg, architecture)


def device_refusal(cfg: DictConfig) -> Refusal:
    """An accelerator that is not there, or a precision it cannot do, stops the run before any data
    work (Lightning would say so only after the data is prepared, or not at all)."""
    trainer = cfg.trainer
    accelerator, precision = str(trainer.get("accelerator", "auto")), str(trainer.get("precision", "32-true"))
    if accelerator in ("gpu", "cuda") and not torch.cuda.is_available():
        ddp = str(trainer.get("strategy", "")).startswith("ddp")  # trainer=ddp: processes on the CPU are ddp_cpu
        return (f"trainer.accelerator={accelerator}: this machine has no GPU that torch can use "
                f"(torch.cuda.is_available() is False); use {'trainer=ddp_cpu' if ddp else 'trainer=cpu'}")
    gpu = on_gpu(trainer)
    if precision in ("16", "16-mixed", "16-true", "half") and not gpu:
        return f"trainer.precision={precision}: float16 needs a GPU; on the CPU use bf16-mixed or 32-true"
    if precision.startswith("bf16") and gpu and not torch.cuda.is_bf16_supported():
        return (f"trainer.precision={precision}: this GPU ({torch.cuda.get_device_name()}) has no bfloat16; use "
                "16-mixed or 32-true")
    return None


def on_gpu(trainer: DictConfig) -> bool:
    """Whether the run trains on a GPU (trainer.accelerator gpu, cuda, or auto with one there)."""
    return torch.cuda.is_available() and str(trainer.get("accelerator", "auto")) in ("gpu", "cuda", "auto")


def packed_refusal(cfg: DictConfig) -> Refusal:
    """data.packed=true on a GPU needs torch's varlen kernel as `model.attention.packed_attention`
    calls it: fp16 / bf16 activations and no attention dropout. Without it packed attention takes
    the exact reference (unpack, padded SDPA, pack), slower than plain padding, so the run stops
    here with the key and the reason. On a CPU packing always takes the reference (no kernel).
    (Relative positions, which have no packed path, the schema refuses: schema/between_groups.py.)"""
    if not OmegaConf.select(cfg, "data.packed", default=False) or not on_gpu(cfg.trainer):
        return None
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
        return None
    return (f"data.packed=true: torch's varlen attention kernel cannot run ({reason}), and packed attention without "
            "it is slower than padding; set data.packed=false")


def machine_refusal(cfg: DictConfig) -> Refusal:
    """The first rule this machine breaks for a training run of `cfg` (its device, precision, packing), or None."""
    return first_refusal((device_refusal, packed_refusal), cfg)
