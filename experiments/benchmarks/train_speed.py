"""Training speed of our Transformer against Hugging Face's MarianMTModel and torch.nn.Transformer
at the same dimensions and batches, in one run (systems interleaved step by step, each first in turn).

    python experiments/benchmarks/train_speed.py [--device cpu|cuda] [--precision fp32 bf16] [--steps 8]

The paper's base model (d_model 512, d_ff 2048, 8 heads, 6 + 6 layers, ReLU, post-norm, tied
embeddings), a 10k vocabulary, batches of 64 sentence pairs of 24 + 24 tokens (random ids, no
padding), label-smoothed loss (ours, for every system, on each system's logits), fused Adam. Prints
target tokens/s, the ratio of ours to each peer, and model FLOPs utilization: our FLOPs estimate
(transformer_mt.model.flops) over a matmul peak measured in the same run.
"""

import argparse
import math
import time

import torch
from torch import nn

from transformer_mt.model import Transformer, TransformerConfig
from transformer_mt.model.embedding import sinusoid_table
from transformer_mt.model.flops import training_flops
from transformer_mt.training.loss import label_smoothed_nll_loss

V, D, FF, H, LAYERS, BATCH, LEN, PAD, BOS = 10_000, 512, 2048, 8, 6, 64, 24, 0, 1


class TorchTransformer(nn.Module):
    """torch.nn.Transformer with embeddings, sinusoidal positions and a tied output layer."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(V, D, padding_idx=PAD)
        self.register_buffer("pos", sinusoid_table(256, D), persistent=False)
        self.core = nn.Transformer(D, H, LAYERS, LAYERS, FF, dropout=0.1, batch_first=True)
        self.out = nn.Linear(D, V, bias=False)
        self.out.weight = self.embed.weight

    def forward(self, src, tgt_in):
        scale = math.sqrt(D)
        s = self.embed(src) * scale + self.pos[: src.size(1)]
        t = self.embed(tgt_in) * scale + self.pos[: tgt_in.size(1)]
        mask = nn.Transformer.generate_square_subsequent_mask(tgt_in.size(1), device=src.device)
        return self.out(self.core(s, t, tgt_mask=mask, tgt_is_causal=True))


class HFMarian(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        import transformers

        config = transformers.MarianConfig(
            vocab_size=V, decoder_vocab_size=V, d_model=D, encoder_layers=LAYERS, decoder_layers=LAYERS,
            encoder_attention_heads=H, decoder_attention_heads=H, encoder_ffn_dim=FF, decoder_ffn_dim=FF,
            activation_function="relu", max_position_embeddings=256, scale_embedding=True, pad_token_id=PAD,
            decoder_start_token_id=BOS, dropout=0.1)
        self.model = transformers.MarianMTModel(config)

    def forward(self, src, tgt_in):
        return self.model(input_ids=src, decoder_input_ids=tgt_in).logits


class Ours(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.model = Transformer(TransformerConfig(src_vocab_size=V, tgt_vocab_size=V, pad_id=PAD))

    def forward(self, src, tgt_in):
        return self.model(src, tgt_in)


def matmul_peak(device: str, dtype: torch.dtype, n: int = 2048, reps: int = 10) -> float:
    """FLOP/s of an n x n matmul on this device and dtype, measured now."""
    a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
    for _ in range(2):
        a @ b
    sync(device)
    start = time.perf_counter()
    for _ in range(reps):
        a @ b
    sync(device)
    return 2 * n**3 * reps / (time.perf_counter() - start)


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--precision", nargs="+", default=["fp32"], choices=["fp32", "bf16"])
    parser.add_argument("--steps", type=int, default=8, help="timed steps per system (after 2 warm-up steps)")
    args = parser.parse_args()
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    src = torch.randint(4, V, (BATCH, LEN), generator=gen).to(args.device)
    tgt = torch.randint(4, V, (BATCH, LEN + 1), generator=gen).to(args.device)
    tgt[:, 0] = BOS
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    config = TransformerConfig(src_vocab_size=V, tgt_vocab_size=V, pad_id=PAD)
    flops = training_flops(config, BATCH * LEN, BATCH * LEN, LEN, LEN)
    print(f"device {args.device}, {torch.get_num_threads()} threads; model FLOPs per step {flops / 1e9:.1f} G\n")
    for precision in args.precision:
        dtype = torch.bfloat16 if precision == "bf16" else torch.float32
        peak = matmul_peak(args.device, dtype)
        systems = {"ours": Ours(), "HF MarianMTModel": HFMarian(), "torch nn.Transformer": TorchTransformer()}
        optimizers = {}
        for name, model in systems.items():
            model.to(args.device).train()
            optimizers[name] = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=True)
        seconds = {name: [] for name in systems}
        for step in range(args.steps + 2):
            names = list(systems)
            names = names[step % len(names):] + names[: step % len(names)]  # interleaved, each first in turn
            for name in names:
                model = systems[name]
                sync(args.device)
                start = time.perf_counter()
                with torch.autocast(args.device.split(":")[0], dtype=torch.bfloat16, enabled=precision == "bf16"):
                    logits = model(src, tgt_in)
                loss_sum, _, ntokens = label_smoothed_nll_loss(logits, tgt_out, 0.1, PAD)
                (loss_sum / ntokens).backward()
                optimizers[name].step()
                optimizers[name].zero_grad(set_to_none=True)
                sync(args.device)
                if step >= 2:
                    seconds[name].append(time.perf_counter() - start)
        tokens = BATCH * LEN
        rate = {name: tokens * len(s) / sum(s) for name, s in seconds.items()}
        print(f"### {precision} (measured matmul peak {peak / 1e12:.2f} TFLOP/s)\n")
        print("| system | target tokens/s | ours / this | MFU vs measured peak |\n| --- | ---: | ---: | ---: |")
        for name, r in rate.items():
            mfu = flops * r / tokens / peak
            print(f"| {name} | {r:.0f} | {rate['ours'] / r:.2f} | {mfu:.1%} |")
        print()


if __name__ == "__main__":
    main()
