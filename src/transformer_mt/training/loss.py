"""Label-smoothed cross-entropy (Szegedy et al. 2016, as used in the paper)."""

import torch
import torch.nn.functional as F


def label_smoothed_nll_loss(
    logits: torch.Tensor, target: torch.Tensor, epsilon: float, ignore_index: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Summed losses over non-padding target tokens.

    The smoothed target puts 1 - epsilon + epsilon / V on the reference token and epsilon / V on
    every other one (the same as `F.cross_entropy(label_smoothing=epsilon)`), so
        loss = (1 - epsilon) * nll + epsilon * mean_v(-log p_v).
    Returns (loss_sum, nll_sum, num_tokens); divide by num_tokens for per-token values.
    """
    lprobs = F.log_softmax(logits.float(), dim=-1)  # one fp32 log-softmax, never copied or indexed
    keep = target != ignore_index
    nll = -lprobs.gather(-1, target.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    smooth = -lprobs.mean(dim=-1)
    loss = ((1.0 - epsilon) * nll + epsilon * smooth).masked_fill(~keep, 0.0)
    return loss.sum(), nll.masked_fill(~keep, 0.0).sum(), keep.sum()
