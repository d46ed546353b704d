"""The systems ours is compared with, built at our shapes: torch.nn.Transformer (with embeddings,
sinusoidal positions and a tied output layer) and Hugging Face's MarianMTModel, each with the
label-smoothed loss of its logits. Used by train_speed.py and loop_speed.py (their sibling: a script's own
folder is where Python looks first)."""

import math
from dataclasses import dataclass

from synthetic import BOS, PAD
from torch import nn

from transformer_mt.model.embedding import sinusoid_table
from transformer_mt.training.loss import label_smoothed_nll_loss

V = 10_000  # train_speed.py's vocabulary


@dataclass
class Shape:
    d: int
    ff: int
    heads: int
    layers: int
    batch: int
    length: int


class TorchTransformer(nn.Module):
    """torch.nn.Transformer with embeddings, sinusoidal positions and a tied output layer."""

    def __init__(self, shape: Shape) -> None:
        super().__init__()
        self.embed = nn.Embedding(V, shape.d, padding_idx=PAD)
        self.register_buffer("pos", sinusoid_table(256, shape.d), persistent=False)
        self.core = nn.Transformer(shape.d, shape.heads, shape.layers, shape.layers, shape.ff, dropout=0.1,
                                   batch_first=True)
        self.out = nn.Linear(shape.d, V, bias=False)
        self.out.weight = self.embed.weight

    def forward(self, src, tgt_in):
        scale = math.sqrt(self.embed.embedding_dim)
        s = self.embed(src) * scale + self.pos[: src.size(1)]
        t = self.embed(tgt_in) * scale + self.pos[: tgt_in.size(1)]
        mask = nn.Transformer.generate_square_subsequent_mask(tgt_in.size(1), device=src.device)
        return self.out(self.core(s, t, tgt_mask=mask, tgt_is_causal=True))

    def loss(self, src, tgt_in, tgt_out):
        return label_smoothed_nll_loss(self(src, tgt_in), tgt_out, 0.1, PAD)


class HFMarian(nn.Module):
    def __init__(self, shape: Shape, vocab: int = V, positions: int = 256, dropout: float = 0.1) -> None:
        super().__init__()
        import transformers

        config = transformers.MarianConfig(
            vocab_size=vocab, decoder_vocab_size=vocab, d_model=shape.d, encoder_layers=shape.layers,
            decoder_layers=shape.layers, encoder_attention_heads=shape.heads, decoder_attention_heads=shape.heads,
            encoder_ffn_dim=shape.ff, decoder_ffn_dim=shape.ff,
            activation_function="relu", max_position_embeddings=positions, scale_embedding=True, pad_token_id=PAD,
            decoder_start_token_id=BOS, dropout=dropout)
        self.model = transformers.MarianMTModel(config)

    def forward(self, src, tgt_in):
        return self.model(input_ids=src, decoder_input_ids=tgt_in).logits

    def loss(self, src, tgt_in, tgt_out):
        return label_smoothed_nll_loss(self(src, tgt_in), tgt_out, 0.1, PAD)

