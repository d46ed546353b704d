"""The post-norm model equals a stack of torch.nn.TransformerEncoderLayer / DecoderLayer."""

import torch
from torch import nn

from tests.helpers import make_model


def copy_attention(ours, ref: nn.MultiheadAttention) -> None:
    if ours.cross:
        d = ours.q_proj.out_features
        ref.in_proj_weight[:d].copy_(ours.q_proj.weight)
        ref.in_proj_bias[:d].copy_(ours.q_proj.bias)
        ref.in_proj_weight[d:].copy_(ours.kv_proj.weight)
        ref.in_proj_bias[d:].copy_(ours.kv_proj.bias)
    else:
        ref.in_proj_weight.copy_(ours.qkv_proj.weight)
        ref.in_proj_bias.copy_(ours.qkv_proj.bias)
    ref.out_proj.weight.copy_(ours.out_proj.weight)
    ref.out_proj.bias.copy_(ours.out_proj.bias)


def copy_ffn_and_norms(ours, ref, blocks) -> None:
    ref.linear1.load_state_dict(ours.ffn.linear1.state_dict())
    ref.linear2.load_state_dict(ours.ffn.linear2.state_dict())
    for i, block in enumerate(blocks, start=1):
        getattr(ref, f"norm{i}").load_state_dict(block.norm.state_dict())


@torch.no_grad()
def test_post_norm_model_matches_torch_reference_layers():
    model = make_model(d_model=32, heads=4, d_ff=64, num_encoder_layers=3, num_decoder_layers=2)
    d, h, ff = 32, 4, 64
    enc = [nn.TransformerEncoderLayer(d, h, ff, dropout=0.0, batch_first=True) for _ in range(3)]
    dec = [nn.TransformerDecoderLayer(d, h, ff, dropout=0.0, batch_first=True) for _ in range(2)]
    for ours, ref in zip(model.encoder_layers, enc):
        copy_attention(ours.self_attn, ref.self_attn)
        copy_ffn_and_norms(ours, ref, [ours.attn_block, ours.ffn_block])
    for ours, ref in zip(model.decoder_layers, dec):
        copy_attention(ours.self_attn, ref.self_attn)
        copy_attention(ours.cross_attn, ref.multihead_attn)
        copy_ffn_and_norms(ours, ref, [ours.self_block, ours.cross_block, ours.ffn_block])
    for layer in enc + dec:
        layer.eval()

    src = torch.randint(4, 50, (3, 9))
    src[0, 6:] = 0
    src[2, 3:] = 0
    tgt = torch.randint(4, 50, (3, 7))
    src_pad = src == 0
    causal = nn.Transformer.generate_square_subsequent_mask(7)

    x = model.src_pos(model.src_embed(src))
    for layer in enc:
        x = layer(x, src_key_padding_mask=src_pad)
    memory = x
    y = model.tgt_pos(model.tgt_embed(tgt))
    for layer in dec:
        y = layer(y, memory, tgt_mask=causal, memory_key_padding_mask=src_pad)
    expected = y @ model.tgt_embed.weight.T

    out = model(src, tgt)
    keep = ~src_pad  # padded encoder positions may differ; the logits may not
    torch.testing.assert_close(model.encode(src)[keep], memory[keep], atol=1e-5, rtol=0)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=0)
