"""Training speed of our Transformer against Hugging Face's MarianMTModel and torch.nn.Transformer
at the same dimensions and batches, in one run (systems interleaved step by step, each first in turn).

    python experiments/benchmarks/train_speed.py [--device cpu|cuda] [--precision fp32 bf16] [--steps 8]
        [--shape base|recipe]

--shape base (default): the paper's base model (d_model 512, d_ff 2048, 8 heads, 6 + 6 layers),
batches of 64 sentence pairs of 24 + 24 tokens; --shape recipe: experiment=multi30k_recipe's
model (d_model 128, d_ff 256, 4 heads, 4 + 4 layers), batches of 256 pairs of 16 + 16 tokens.
Both: ReLU, post-norm, tied embeddings, a 10k vocabulary, random ids (no padding), label-smoothed
loss (the peers: our `label_smoothed_nll_loss` on their logits; ours: its training path,
`output_layer_loss`, which applies the output layer chunk by chunk), fused Adam. Prints target
tokens/s, the ratio of ours to each peer, and model FLOPs utilization: our FLOPs estimate
(transformer_mt.model.flops) over a matmul peak measured in the same run.

What a training run does, step for step (Lightning, token-budget batches, a profile): loop_speed.py.
"""

import argparse
import time

import torch
from peer_models import HFMarian, Shape, TorchTransformer, V
from step_timing import matmul_peak, sync
from synthetic import BOS, PAD
from torch import nn

from transformer_mt.markdown import markdown_table
from transformer_mt.model import Transformer, TransformerConfig
from transformer_mt.model.flops import training_flops
from transformer_mt.training.loss import output_layer_loss

SHAPES = {"base": Shape(512, 2048, 8, 6, 64, 24), "recipe": Shape(128, 256, 4, 4, 256, 16)}


class Ours(nn.Module):
    def __init__(self, shape: Shape) -> None:
        super().__init__()
        self.model = Transformer(config_of(shape))

    def loss(self, src, tgt_in, tgt_out):
        """As TranslationModule trains: decoder states, then output layer + loss chunk by chunk."""
        out = self.model.output_proj
        return output_layer_loss(self.model.features(src, tgt_in), out.weight, out.bias, tgt_out, 0.1, PAD)


def config_of(shape: Shape) -> TransformerConfig:
    return TransformerConfig(src_vocab_size=V, tgt_vocab_size=V, pad_id=PAD, num_encoder_layers=shape.layers,
                             num_decoder_layers=shape.layers, d_model=shape.d, d_ff=shape.ff, heads=shape.heads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--precision", nargs="+", default=["fp32"], choices=["fp32", "bf16"])
    parser.add_argument("--steps", type=int, default=8, help="timed steps per system (after 2 warm-up steps)")
    parser.add_argument("--shape", default="base", choices=sorted(SHAPES))
    args = parser.parse_args()
    shape = SHAPES[args.shape]
    batch, length = shape.batch, shape.length
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    src = torch.randint(4, V, (batch, length), generator=gen).to(args.device)
    tgt = torch.randint(4, V, (batch, length + 1), generator=gen).to(args.device)
    tgt[:, 0] = BOS
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    flops = training_flops(config_of(shape), batch * length, batch * length, length, length)
    print(f"device {args.device}, {torch.get_num_threads()} threads; model FLOPs per step {flops / 1e9:.1f} G\n")
    for precision in args.precision:
        dtype = torch.bfloat16 if precision == "bf16" else torch.float32
        peak = matmul_peak(args.device, dtype)
        systems = {"ours": Ours(shape), "HF MarianMTModel": HFMarian(shape),
                   "torch nn.Transformer": TorchTransformer(shape)}
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
                    loss_sum, _, ntokens = model.loss(src, tgt_in, tgt_out)
                (loss_sum / ntokens).backward()
                optimizers[name].step()
                optimizers[name].zero_grad(set_to_none=True)
                sync(args.device)
                if step >= 2:
                    seconds[name].append(time.perf_counter() - start)
        tokens = batch * length
        rate = {name: tokens * len(s) / sum(s) for name, s in seconds.items()}
        print(f"### {precision} (measured matmul peak {peak / 1e12:.2f} TFLOP/s)\n")
        rows = [[name, f"{r:.0f}", f"{rate['ours'] / r:.2f}", f"{flops * r / tokens / peak:.1%}"]
                for name, r in rate.items()]
        print(markdown_table(["system", "target tokens/s", "ours / this", "MFU vs measured peak"], rows,
                             right=(1, 2, 3)))
        print()


if __name__ == "__main__":
    main()
