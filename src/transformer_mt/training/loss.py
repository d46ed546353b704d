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


def output_layer_loss(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, target: torch.Tensor,
                      epsilon: float, ignore_index: int, chunk_rows: int | None = None
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`label_smoothed_nll_loss(F.linear(hidden, weight, bias), ...)` without the logits.

    The output layer and the loss are computed together, `chunk_rows` target tokens at a time:
    the (tokens x vocabulary) logits, their log-softmax and its gradient never exist whole, which
    is most of a small model's training time on a CPU (memory traffic, not arithmetic). Padding
    rows are dropped first. Same values and gradients as the plain path, up to float rounding.
    chunk_rows: None = about 2^20 logits per chunk on a CPU (cache-sized), 2^26 on a GPU.
    """
    if chunk_rows is None:
        chunk_rows = max(1, (1 << 20 if hidden.device.type == "cpu" else 1 << 26) // weight.size(0))
    keep = target != ignore_index
    rows, labels = hidden[keep], target[keep]
    # under no_grad (validation, test) no gradient is computed: needs_input_grad would still say yes
    loss_sum, nll_sum = _OutputLayerLoss.apply(rows, weight, bias, labels, epsilon, chunk_rows, torch.is_grad_enabled())
    return loss_sum, nll_sum, keep.sum()


class _OutputLayerLoss(torch.autograd.Function):
    """Label-smoothed cross-entropy of linear(hidden); the gradients are computed chunk by chunk
    in the forward pass (d loss / d logits = softmax - (1 - eps) onehot - eps / V) and only scaled
    in the backward pass."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, labels, epsilon: float, chunk_rows: int, grad_enabled: bool):
        need = ctx.needs_input_grad if grad_enabled else (False,) * 3
        vocab = weight.size(0)
        loss_sum = torch.zeros((), dtype=torch.float32, device=hidden.device)
        nll_sum = torch.zeros((), dtype=torch.float32, device=hidden.device)
        grad_hidden = torch.empty_like(hidden) if need[0] else None
        grad_weight = torch.zeros_like(weight, dtype=torch.float32) if need[1] else None
        grad_bias = torch.zeros_like(bias, dtype=torch.float32) if bias is not None and need[2] else None
        for start in range(0, hidden.size(0), chunk_rows):
            h, y = hidden[start : start + chunk_rows], labels[start : start + chunk_rows]
            logits = F.linear(h, weight, bias).float()
            lse = logits.logsumexp(dim=-1)
            nll = lse - logits.gather(-1, y[:, None]).squeeze(-1)
            smooth = lse - logits.mean(dim=-1)  # mean over the vocabulary of -log p
            loss_sum += ((1.0 - epsilon) * nll + epsilon * smooth).sum()
            nll_sum += nll.sum()
            if any(need[:3]):
                grad = logits.sub_(lse[:, None]).exp_().sub_(epsilon / vocab)  # in place: softmax - eps / V
                grad.scatter_add_(-1, y[:, None], torch.full_like(grad[:, :1], epsilon - 1.0))
                if grad_hidden is not None:
                    grad_hidden[start : start + chunk_rows] = grad.to(weight.dtype) @ weight
                if grad_weight is not None:
                    grad_weight += grad.T @ h.float()
                if grad_bias is not None:
                    grad_bias += grad.sum(dim=0)
        ctx.mark_non_differentiable(nll_sum)
        ctx.save_for_backward(*(g if g is not None else torch.empty(0) for g in (grad_hidden, grad_weight,
                                                                                   grad_bias)))
        ctx.has = (grad_hidden is not None, grad_weight is not None, grad_bias is not None)
        ctx.dtypes = (hidden.dtype, weight.dtype, None if bias is None else bias.dtype)
        return loss_sum, nll_sum

    @staticmethod
    def backward(ctx, grad_loss, _grad_nll):
        grads = [(g * grad_loss).to(dtype) if has else None
                 for g, has, dtype in zip(ctx.saved_tensors, ctx.has, ctx.dtypes)]
        return *grads, None, None, None, None
