"""A CPU kernel for torch's variable-length attention op (`torch.nn.attention.varlen.varlen_attn`),
so that the packed path that runs on a GPU can run, and be compiled, on the CPU in tests.

torch defines `torch_attn::_varlen_attn` and its backward as custom ops whose kernels call CUDA's
flash (or cuDNN) attention. Importing this module registers CPU kernels for both, computing the
same thing the padded way: each sequence's rows laid out (B, H, L, d_k), scores masked past each
key sequence's end (and above the diagonal when causal), softmax, and the rows taken back; the
backward from the saved log-sum-exp, as flash attention's does. The op keeps its autograd and fake (meta) registrations,
so torch.compile traces it as one opaque call, as it would on a GPU.
"""

import math

import numpy as np
import torch
import torch.nn.attention.varlen  # noqa: F401  (defines the ops)

from transformer_mt.packing import Packed


def layout(cu_seqlens: torch.Tensor) -> Packed:
    return Packed.from_lengths(np.diff(cu_seqlens.cpu().numpy()))


def probabilities(q, k, cu_q, cu_k, causal: bool, scale: float | None, lse: torch.Tensor | None = None):
    """The padded (B, H, Lq, Lk) softmax of q k^T, the log-sum-exp (B, H, Lq), and the two layouts."""
    queries, keys = layout(cu_q), layout(cu_k)
    qp, kp = queries.unpack(q).transpose(1, 2), keys.unpack(k).transpose(1, 2)
    scores = (qp @ kp.transpose(-2, -1)).float() * (scale or 1 / math.sqrt(q.size(-1)))
    visible = torch.arange(keys.max_length) < keys.lengths()[:, None]  # (B, Lk)
    mask = visible[:, None, None, :]
    if causal:
        mask = mask & torch.ones(queries.max_length, keys.max_length, dtype=torch.bool).tril()
    scores = scores.masked_fill(~mask, float("-inf"))
    if lse is None:
        lse = scores.logsumexp(dim=-1)
    else:  # (H, Nq) -> (B, H, Lq)
        lse = queries.unpack(lse.T.contiguous()).transpose(1, 2)
    probs = (scores - lse[..., None]).exp().nan_to_num(0.0)  # padded query rows: no keys at all
    return probs, lse, queries, keys


def forward(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, is_causal=False, scale=None, window_size=None,
            enable_gqa=False, seqused_k=None, block_table=None, num_splits=None):
    probs, lse, queries, keys = probabilities(query, key, cu_seq_q, cu_seq_k, is_causal, scale)
    vp = keys.unpack(value).transpose(1, 2).float()
    out = queries.pack((probs @ vp).transpose(1, 2)).to(query.dtype)
    lse = queries.pack(lse.transpose(1, 2)).T.contiguous()  # (H, Nq), as flash attention returns it
    return out, lse, torch.zeros(2, dtype=torch.uint64)


def backward(grad_out, query, key, value, out, lse, cu_seq_q, cu_seq_k, max_q, max_k, is_causal, rng_state,
             scale=None, window_size=None):
    probs, _, queries, keys = probabilities(query, key, cu_seq_q, cu_seq_k, is_causal, scale, lse)
    scale = scale or 1 / math.sqrt(query.size(-1))
    qp, kp, vp = (s.unpack(t).transpose(1, 2).float() for s, t in ((queries, query), (keys, key), (keys, value)))
    dout, outp = (queries.unpack(t).transpose(1, 2).float() for t in (grad_out, out))
    dv = probs.transpose(-2, -1) @ dout
    dprobs = dout @ vp.transpose(-2, -1)
    dscores = probs * (dprobs - (dout * outp).sum(dim=-1, keepdim=True)) * scale
    dq, dk = dscores @ kp, dscores.transpose(-2, -1) @ qp
    return (queries.pack(dq.transpose(1, 2)).to(query.dtype), keys.pack(dk.transpose(1, 2)).to(key.dtype),
            keys.pack(dv.transpose(1, 2)).to(value.dtype))


torch.library.register_kernel("torch_attn::_varlen_attn", "cpu", forward)
torch.library.register_kernel("torch_attn::_varlen_attn_backward", "cpu", backward)
