"""Model FLOPs of the Transformer, estimated from its shape (for throughput and MFU).

Counted as nanoGPT's `estimate_mfu` does: 2 FLOPs per multiply-add of every matrix product,
attention scores and weighted sums over the whole key length (no saving for the causal mask),
nothing for embeddings, LayerNorms, softmax or biases; a training step is 3 forward passes
(forward, and a backward pass of twice its cost). Per layer, with d = d_model, i = heads * d_k,
f = d_ff, S and T the source and target lengths, V the target vocabulary:

    encoder, per source token:  8 d i (Q, K, V, output projections) + 4 S i (attention) + 4 d f (FFN)
    decoder, per source token:  4 d i (K, V of the memory for cross-attention, once per layer)
    decoder, per target token:  8 d i + 4 T i (self-attention) + 4 d i + 4 S i (cross-attention:
                                Q and output projections, attention) + 4 d f (FFN)
    output layer, per target token: 2 d V

With model.positional=relative, self-attention's scores and weighted sums are computed a second
time against the distance embeddings (relative.py): 4 S i more per source token and 4 T i more per
target token in each layer. Rotary positions rotate queries and keys elementwise: nothing counted.
"""

from transformer_mt.model.positions import KINDS
from transformer_mt.model.transformer import TransformerConfig


def forward_flops(config: TransformerConfig, src_len: float, tgt_len: float) -> tuple[float, float]:
    """Forward FLOPs (per source token, per target token) for sentences of src_len and tgt_len tokens."""
    d, f, i = config.d_model, config.d_ff, config.heads * config.d_k
    self_attention = 4 * KINDS[config.positional].attention_passes  # relative: the distance terms too
    per_src = (config.num_encoder_layers * (8 * d * i + self_attention * src_len * i + 4 * d * f)
               + config.num_decoder_layers * 4 * d * i)
    per_tgt = (config.num_decoder_layers * (12 * d * i + (self_attention * tgt_len + 4 * src_len) * i + 4 * d * f)
               + 2 * d * config.tgt_vocab_size)
    return per_src, per_tgt


def training_flops(config: TransformerConfig, src_tokens: int, tgt_tokens: int, src_len: float,
                   tgt_len: float) -> float:
    """FLOPs of one training step (forward and backward) on src_tokens source and tgt_tokens target
    tokens (padding excluded) of sentences src_len and tgt_len tokens long on average."""
    per_src, per_tgt = forward_flops(config, src_len, tgt_len)
    return 3 * (src_tokens * per_src + tgt_tokens * per_tgt)
