"""Learning-rate schedules follow their formulas, step by step through a real optimizer."""

import math

import pytest
import torch

from transformer_mt.training.schedule import inverse_sqrt, noam


def lrs(scheduler_fn, lr: float, steps: int, **kwargs) -> list[float]:
    """The learning rate used by optimizer steps 1..steps."""
    param = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.Adam([param], lr=lr, betas=(0.9, 0.98), eps=1e-9)
    sched = scheduler_fn(opt, **kwargs)
    out = []
    for _ in range(steps):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out


def test_noam_matches_the_paper_formula():
    d_model, warmup, factor = 512, 4000, 2.0
    got = lrs(noam, factor, 12000, d_model=d_model, warmup_steps=warmup)
    for step in (1, 10, 1000, 3999, 4000, 4001, 8000, 12000):
        expected = factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)
        assert got[step - 1] == pytest.approx(expected, rel=1e-9)
    assert max(got) == pytest.approx(got[warmup - 1])  # the peak is at step = warmup


def test_inverse_sqrt_matches_fairseq():
    peak, warmup, init = 5e-4, 100, 1e-7
    got = lrs(inverse_sqrt, peak, 400, warmup_steps=warmup, warmup_init_lr=init)
    for step in (1, 50, 99):
        assert got[step - 1] == pytest.approx(init + (peak - init) * step / warmup, rel=1e-9)
    for step in (100, 101, 400):
        assert got[step - 1] == pytest.approx(peak * math.sqrt(warmup / step), rel=1e-9)
