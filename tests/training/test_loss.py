"""The label-smoothed loss against a hand computation."""

import math

import pytest
import torch
import torch.nn.functional as F

from transformer_mt.training.loss import label_smoothed_nll_loss


def test_matches_hand_computation():
    logits = torch.tensor([[[2.0, 0.5, -1.0, 0.0], [0.1, 0.2, 0.3, 0.4]]])  # (1, 2, V=4)
    target = torch.tensor([[1, 3]])
    eps, v = 0.1, 4
    expected_loss, expected_nll = 0.0, 0.0
    for t in range(2):
        y = int(target[0, t])
        row = logits[0, t].tolist()
        log_z = math.log(sum(math.exp(x) for x in row))
        logp = [x - log_z for x in row]
        for k in range(v):
            q = (1 - eps) * (k == y) + eps / v
            expected_loss -= q * logp[k]
        expected_nll -= logp[y]
    loss, nll, n = label_smoothed_nll_loss(logits, target, eps, ignore_index=0)
    assert loss.item() == pytest.approx(expected_loss, abs=1e-5)
    assert nll.item() == pytest.approx(expected_nll, abs=1e-5)
    assert n.item() == 2


def test_ignores_padding_and_equals_torch_cross_entropy():
    torch.manual_seed(0)
    logits = torch.randn(3, 5, 11)
    target = torch.randint(1, 11, (3, 5))
    target[0, 3:] = 0
    target[2, 1:] = 0
    loss, nll, n = label_smoothed_nll_loss(logits, target, 0.2, ignore_index=0)
    ref = F.cross_entropy(logits.view(-1, 11), target.view(-1), ignore_index=0, label_smoothing=0.2, reduction="sum")
    ref_nll = F.cross_entropy(logits.view(-1, 11), target.view(-1), ignore_index=0, reduction="sum")
    assert loss.item() == pytest.approx(ref.item(), rel=1e-5)
    assert nll.item() == pytest.approx(ref_nll.item(), rel=1e-5)
    assert n.item() == int((target != 0).sum())
    # changing logits at padded positions changes nothing
    logits2 = logits.clone()
    logits2[2, 1:] += 100.0
    assert label_smoothed_nll_loss(logits2, target, 0.2, 0)[0].item() == pytest.approx(loss.item(), rel=1e-6)


def test_epsilon_zero_is_plain_nll():
    logits = torch.randn(2, 4, 7)
    target = torch.randint(1, 7, (2, 4))
    loss, nll, _ = label_smoothed_nll_loss(logits, target, 0.0, ignore_index=0)
    assert loss.item() == pytest.approx(nll.item(), rel=1e-6)
