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
                      epsilon: float, ignore_index: int, chunk_rows: int | None = None, chunk_fn=None
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`label_smoothed_nll_loss(F.linear(hidden, weight, bias), ...)` without the logits.

    The output layer and the loss are computed together, `chunk_rows` target positions at a time
    (`chunk_loss`): the (positions x vocabulary) logits, their log-softmax and its gradient never
    exist whole, and no fp32 copy of them is ever made for the whole batch. Padding positions are
    computed and then zeroed, never selected: selecting them would need their count on the host (a
    sync with the device every step). Same values and gradients as the plain path, up to float
    rounding. chunk_rows: None = about 2^20 logits per chunk on a CPU (cache-sized), 2^26 on a GPU.
    chunk_fn: `chunk_loss` or a compiled version of it (TranslationModule's `compile`).
    """
    if chunk_rows is None:
        chunk_rows = max(1, (1 << 20 if hidden.device.type == "cpu" else 1 << 26) // weight.size(0))
    hidden, target = hidden.reshape(-1, hidden.size(-1)), target.reshape(-1)
    keep = target != ignore_index
    labels = torch.where(keep, target, 0)  # any valid index: these rows are zeroed
    # under no_grad (validation, test) no gradient is computed: needs_input_grad would still say yes
    loss_sum, nll_sum = _OutputLayerLoss.apply(hidden, weight, bias, labels, keep, epsilon, chunk_rows,
                                               torch.is_grad_enabled(), chunk_fn or chunk_loss)
    return loss_sum, nll_sum, keep.sum()


def chunk_loss(h: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, labels: torch.Tensor,
               keep: torch.Tensor, epsilon: float, need_grad: bool) -> tuple[torch.Tensor | None, ...]:
    """One chunk of `output_layer_loss`: the summed smoothed loss and NLL of rows h (N, D) with
    `labels` where `keep`, and with need_grad the chunk's gradients for h, weight and bias (None
    without a bias), from d loss / d logits = softmax - (1 - eps) onehot - eps / V. Logits in fp32
    for this chunk only; their gradient is computed in place in the logits' buffer (eager: no
    temporaries; compiled: one fused pass), and rows not kept are zeroed in the (N, D) inputs and
    outputs of the products, never in the (N, V) gradient."""
    logits = F.linear(h, weight, bias).float()
    lse = logits.logsumexp(dim=-1)
    nll = lse - logits.gather(-1, labels[:, None]).squeeze(-1)
    smooth = lse - logits.mean(dim=-1)  # mean over the vocabulary of -log p
    loss_sum = torch.where(keep, (1.0 - epsilon) * nll + epsilon * smooth, 0.0).sum()
    nll_sum = torch.where(keep, nll, 0.0).sum()
    if not need_grad:
        return loss_sum, nll_sum, None, None, None
    grad = logits.sub_(lse[:, None]).exp_().sub_(epsilon / weight.size(0))  # in place: softmax - eps / V
    grad.scatter_add_(-1, labels[:, None], torch.full_like(grad[:, :1], epsilon - 1.0))
    kept = keep[:, None]
    grad_h = torch.where(kept, grad.to(weight.dtype) @ weight, 0.0)
    grad_w = grad.T @ torch.where(kept, h, 0.0).float()
    grad_b = keep.to(grad.dtype) @ grad if bias is not None else None
    return loss_sum, nll_sum, grad_h, grad_w, grad_b


class _OutputLayerLoss(torch.autograd.Function):
    """Label-smoothed cross-entropy of linear(hidden); the gradients are computed chunk by chunk
    in the forward pass and only scaled in the backward pass."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, labels, keep, epsilon: float, chunk_rows: int, grad_enabled: bool,
                chunk_fn):
        need = ctx.needs_input_grad if grad_enabled else (False,) * 3
        loss_sum = torch.zeros((), dtype=torch.float32, device=hidden.device)
        nll_sum = torch.zeros((), dtype=torch.float32, device=hidden.device)
        grad_hidden = torch.empty_like(hidden) if need[0] else None
        grad_weight = torch.zeros_like(weight, dtype=torch.float32) if need[1] else None
        grad_bias = torch.zeros_like(bias, dtype=torch.float32) if bias is not None and need[2] else None
        for start in range(0, hidden.size(0), chunk_rows):
            rows = slice(start, start + chunk_rows)
            loss, nll, grad_h, grad_w, grad_b = chunk_fn(hidden[rows], weight, bias, labels[rows], keep[rows],
                                                         epsilon, any(need[:3]))
            loss_sum += loss
            nll_sum += nll
            if grad_hidden is not None:
                grad_hidden[rows] = grad_h
            if grad_weight is not None:
                grad_weight += grad_w
            if grad_bias is not None:
                grad_bias += grad_b
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
        return grads[0], grads[1], grads[2], None, None, None, None, None, None
