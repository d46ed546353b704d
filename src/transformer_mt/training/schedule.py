"""Learning-rate schedules, stepped once per optimizer step (step numbers start at 1).

The optimizer's `lr` is the schedule's scale: the paper's `factor` for `noam`, the peak learning
rate for `inverse_sqrt`.
"""

import math

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR


def noam_factor(step: int, d_model: int, warmup_steps: int) -> float:
    """The paper's d_model^-0.5 * min(step^-0.5, step * warmup^-1.5) (times `factor` = the lr)."""
    step = max(step, 1)
    return d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


def inverse_sqrt_factor(step: int, warmup_steps: int, warmup_init_lr: float = 0.0, lr: float = 1.0) -> float:
    """fairseq's inverse_sqrt: linear warm-up from warmup_init_lr to lr, then lr * sqrt(warmup / step)."""
    step = max(step, 1)
    if step < warmup_steps:
        start = warmup_init_lr / lr
        return start + (1.0 - start) * step / warmup_steps
    return math.sqrt(warmup_steps / step)


def noam(optimizer: Optimizer, d_model: int, warmup_steps: int = 4000) -> LambdaLR:
    """lr(step) = optimizer lr (the factor) * noam_factor(step)."""
    return LambdaLR(optimizer, lambda i: noam_factor(i + 1, d_model, warmup_steps))


def inverse_sqrt(optimizer: Optimizer, warmup_steps: int = 4000, warmup_init_lr: float = 0.0) -> LambdaLR:
    """lr(step) = optimizer lr (the peak) * inverse_sqrt_factor(step)."""
    peak = optimizer.param_groups[0]["lr"]
    return LambdaLR(optimizer, lambda i: inverse_sqrt_factor(i + 1, warmup_steps, warmup_init_lr, peak))
