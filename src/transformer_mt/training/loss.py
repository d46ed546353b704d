"""Label-smoothed cross-entropy (Szegedy et al. 2016, as used in the paper), and the training
path's fused output layer + loss."""

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
    return smoothed_loss(F.log_softmax(logits.float(), dim=-1), target, epsilon, ignore_index)  # one fp32 pass


def smoothed_loss(lprobs: torch.Tensor, target: torch.Tensor, epsilon: float, ignore_index: int
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """label_smoothed_nll_loss of log-probabilities (an ensemble's averaged ones), never copied or indexed."""
    keep = target != ignore_index
    nll = -lprobs.gather(-1, target.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    smooth = -lprobs.mean(dim=-1)
    loss = ((1.0 - epsilon) * nll + epsilon * smooth).masked_fill(~keep, 0.0)
    return loss.sum(), nll.masked_fill(~keep, 0.0).sum(), keep.sum()


GPU_TILE_ROWS = 128  # the row tile of a GPU's matrix-product kernels


def default_chunk_rows(vocab_size: int, device: torch.device) -> int:
    """Rows per chunk. On a CPU about 2^20 logits (cache-sized). On a GPU about 2^27 logits (256 MiB
    in bf16: products large enough to fill the card), in a whole number of 128-row tiles, so that
    no chunk ends in a part-filled tile (a compiled chunk pads only the last one)."""
    if device.type == "cpu":
        return max(1, (1 << 20) // vocab_size)
    return max(GPU_TILE_ROWS, (1 << 27) // vocab_size // GPU_TILE_ROWS * GPU_TILE_ROWS)


def output_layer_loss(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, target: torch.Tensor,
                      epsilon: float, ignore_index: int, chunk_rows: int | None = None, chunk_fn=None,
                      vocab_multiple: int = 1) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`label_smoothed_nll_loss(F.linear(hidden, weight, bias), ...)` without the logits.

    With z = h W^T + b and d loss / d z = softmax(z) - (1 - eps) onehot - eps / V, only the
    softmax needs the vocabulary: the one-hot and smoothing terms are a gathered row and a rank-one
    correction, since mean_v(z) = h . mean_v(W) + mean_v(b). So each chunk of `chunk_rows`
    positions (`chunk_loss`) makes its logits in the activation dtype (bf16 under autocast), one
    fp32 log-sum-exp reduction, one pointwise pass for the softmax, and the two products of the
    gradient; everything else is (positions x d_model) work done once. The logits never exist
    whole. Padding positions are computed and then zeroed, never selected: selecting them would
    need their count on the host (a sync with the device every step).

    Precision: in fp32, the plain path's values and gradients up to float rounding. Under autocast
    the log-sum-exp, the loss, the one-hot and smoothing terms and every sum over chunks are fp32,
    while a chunk's logits, softmax and two gradient products are in the activation dtype: each
    product is accumulated in fp32 inside the matmul but rounded to bf16 (8 significant bits) when
    written. So grad_weight is an fp32 sum of one bf16-rounded product per chunk, and each row of
    grad_hidden holds one bf16-rounded product; tested within 1% of each gradient's largest entry,
    the loss within 2e-4 (relative).

    chunk_rows: None = `default_chunk_rows`. chunk_fn: None = `chunk_loss` eagerly (the last chunk
    ragged); else a compiled `chunk_loss`, which gets chunks of exactly chunk_rows rows (the last
    one padded with rows that count for nothing): one shape, one graph. vocab_multiple: the
    products over a vocabulary padded to a multiple of it (`padded_vocabulary`: 37,000 -> 37,120
    for 128, whole GPU tiles), the padded logits masked: the same loss and gradients.
    """
    hidden, target = hidden.reshape(-1, hidden.size(-1)), target.reshape(-1)
    keep = target != ignore_index
    labels = torch.where(keep, target, 0)  # any valid index: these rows are zeroed
    chunk_rows = chunk_rows or default_chunk_rows(weight.size(0), hidden.device)
    # under no_grad (validation, test) no gradient is computed: needs_input_grad would still say yes
    loss_sum, nll_sum = _OutputLayerLoss.apply(hidden, weight, bias, labels, keep, epsilon, chunk_rows,
                                               torch.is_grad_enabled(), chunk_fn, vocab_multiple)
    return loss_sum, nll_sum, keep.sum()


def chunk_loss(h: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, keep: torch.Tensor,
               need_grad: bool, bias_grad: bool = True
               ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
    """One chunk of `output_layer_loss`, rows h (N, D) (zero where not kept) with `keep` (N,) as 0 / 1
    in fp32: the log-sum-exp of each row's logits (fp32), and with need_grad the softmax's parts of
    the gradients: softmax @ W (N, D), softmax^T @ h (V, D) and keep @ softmax (V,) (None without
    a bias, or when bias_grad is false: a bias that only masks padded columns). Logits and softmax in
    the activation dtype; the softmax is written over the logits (eager) or fused with its reduction
    (compiled)."""
    logits = F.linear(h, weight, bias)
    lse = logits.float().logsumexp(dim=-1)
    if not need_grad:
        return lse, None, None, None
    if logits.dtype == torch.float32:
        probs = logits.sub_(lse[:, None]).exp_()  # in place: no other (N, V) buffer
    else:
        probs = (logits.float() - lse[:, None]).exp_().to(logits.dtype)
    grad_h = probs @ weight.to(probs.dtype)
    grad_w = probs.T @ h.to(probs.dtype)
    grad_b = keep.to(probs.dtype) @ probs if bias is not None and bias_grad else None
    return lse, grad_h, grad_w, grad_b


def padded_vocabulary(weight: torch.Tensor, bias: torch.Tensor | None, multiple: int
                      ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The output layer over a vocabulary padded to a multiple of `multiple` (a whole number of
    the GPU's tiles): zero rows of the weight, and a bias of -inf on the padded columns, so that
    their probabilities are exactly 0 and the loss and gradients are the unpadded ones."""
    vocab = weight.size(0)
    extra = -vocab % multiple
    if not extra:
        return weight, bias
    mask = torch.full((extra,), float("-inf"), dtype=weight.dtype, device=weight.device)
    zeros = torch.zeros(vocab, dtype=weight.dtype, device=weight.device) if bias is None else bias.to(weight.dtype)
    return F.pad(weight, (0, 0, 0, extra)), torch.cat([zeros, mask])


def softmax_parts(h: torch.Tensor, keep_f: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                  chunk_rows: int, chunk_fn, need_grad: bool, multiple: int = 1) -> tuple[torch.Tensor, ...]:
    """`chunk_loss` over the rows of h, `chunk_rows` at a time: each row's log-sum-exp (fp32) and,
    with need_grad, the softmax's parts of the gradients, summed over chunks in fp32 (None where
    not needed). The weight (and bias) are cast to the autocast dtype once, not per chunk, and
    padded to a vocabulary of a multiple of `multiple` (`padded_vocabulary`; the gradients' padded
    rows dropped); a compiled chunk_fn gets the last chunk padded to the same shape."""
    n, vocab, has_bias = h.size(0), weight.size(0), bias is not None
    if torch.is_autocast_enabled(h.device.type):
        dtype = torch.get_autocast_dtype(h.device.type)
        weight, bias = weight.to(dtype), None if bias is None else bias.to(dtype)
    weight, bias = padded_vocabulary(weight, bias, multiple)
    lse = torch.empty(n, dtype=torch.float32, device=h.device)
    grad_h = torch.empty(n, weight.size(1), dtype=torch.float32, device=h.device) if need_grad else None
    grad_w = torch.zeros_like(weight, dtype=torch.float32) if need_grad else None
    grad_b = torch.zeros_like(bias, dtype=torch.float32) if has_bias and need_grad else None
    for start in range(0, n, chunk_rows):
        rows = slice(start, start + chunk_rows)
        h_rows, keep_rows = h[rows], keep_f[rows]
        size = h_rows.size(0)
        if chunk_fn is not None and size < chunk_rows:  # one shape for a compiled chunk_fn
            pad = chunk_rows - size
            h_rows, keep_rows = F.pad(h_rows, (0, 0, 0, pad)), F.pad(keep_rows, (0, pad))
        out_lse, out_h, out_w, out_b = (chunk_fn or chunk_loss)(h_rows, weight, bias, keep_rows, need_grad, has_bias)
        lse[rows] = out_lse[:size]
        if need_grad:
            grad_h[rows] = out_h[:size]
            grad_w += out_w
            if grad_b is not None:
                grad_b += out_b
    if grad_w is not None:
        grad_w, grad_b = grad_w[:vocab], None if grad_b is None else grad_b[:vocab]
    return lse, grad_h, grad_w, grad_b


class _OutputLayerLoss(torch.autograd.Function):
    """Label-smoothed cross-entropy of linear(hidden); the gradients are computed chunk by chunk
    in the forward pass and only scaled in the backward pass."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, labels, keep, epsilon: float, chunk_rows: int, grad_enabled: bool,
                chunk_fn, multiple: int):
        need = ctx.needs_input_grad[:3] if grad_enabled else (False,) * 3
        need_grad = any(need)
        vocab = weight.size(0)
        kept = keep[:, None]
        h = torch.where(kept, hidden, 0.0)
        keep_f = keep.float()
        lse, grad_h, grad_w, grad_b = softmax_parts(h, keep_f, weight, bias, chunk_rows, chunk_fn, need_grad, multiple)
        # the parts of the loss and of its gradient that need no pass over the vocabulary
        h32, w_rows = h.float(), weight[labels].float()
        w_mean = weight.float().mean(dim=0)
        b_rows, b_mean = (bias[labels].float(), bias.float().mean()) if bias is not None else (0.0, 0.0)
        nll = lse - ((h32 * w_rows).sum(dim=-1) + b_rows)
        smooth = lse - (h32 @ w_mean + b_mean)  # mean over the vocabulary of -log p
        loss_sum = torch.where(keep, (1.0 - epsilon) * nll + epsilon * smooth, 0.0).sum()
        nll_sum = torch.where(keep, nll, 0.0).sum()
        ctx.mark_non_differentiable(nll_sum)
        ctx.need, ctx.dtypes = need, (hidden.dtype, weight.dtype, None if bias is None else bias.dtype)
        if not need_grad:
            ctx.save_for_backward()
            return loss_sum, nll_sum
        # the one-hot and smoothing terms: -(1 - eps) W[label] - eps mean_v(W) for each kept row's
        # gradient, -(1 - eps) h at the rows of W of its label and -eps / V sum(h) on every row
        grad_h = torch.where(kept, grad_h - (1.0 - epsilon) * w_rows - epsilon * w_mean, 0.0)
        grad_w.index_add_(0, labels, h32, alpha=epsilon - 1.0)
        grad_w -= (epsilon / vocab) * h32.sum(dim=0)
        if grad_b is not None:
            grad_b.index_add_(0, labels, keep_f, alpha=epsilon - 1.0)
            grad_b -= (epsilon / vocab) * keep_f.sum()
        ctx.save_for_backward(*(g if g is not None else torch.empty(0) for g in (grad_h, grad_w, grad_b)))
        return loss_sum, nll_sum

    @staticmethod
    def backward(ctx, grad_loss, _grad_nll):
        grads = [None, None, None]
        if ctx.saved_tensors:
            for i, (g, dtype) in enumerate(zip(ctx.saved_tensors, ctx.dtypes)):
                if ctx.need[i]:
                    grads[i] = (g * grad_loss).to(dtype)
        return grads[0], grads[1], grads[2], None, None, None, None, None, None, None
