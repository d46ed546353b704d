"""train_speed.py --shape: ours, HF Marian and torch.nn.Transformer at fixed shapes, in turns step by step;
--previous: ours in this checkout and in an earlier one, a fresh process of each a round (this script, run
with the checkout's src: only what every checkout has at import)."""

import json
import math
import os
import statistics
import sys
from collections import namedtuple

import harness
import torch
from harness import BOS, PAD
from torch import nn

DTYPES = {"32-true": None, "bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}
Shape = namedtuple("Shape", "d ff heads layers batch length", defaults=(0, 0))
SHAPES = {"base": Shape(512, 2048, 8, 6, 64, 24), "recipe": Shape(128, 256, 4, 4, 256, 16)}
V = 10_000  # --shape's vocabulary


def config_of(shape: Shape, vocab: int = V):
    """Our TransformerConfig at this shape (only what every checkout's config takes)."""
    from transformer_mt.model import TransformerConfig

    return TransformerConfig(src_vocab_size=vocab, tgt_vocab_size=vocab, pad_id=PAD, num_encoder_layers=shape.layers,
                             num_decoder_layers=shape.layers, d_model=shape.d, d_ff=shape.ff, heads=shape.heads)


class System(nn.Module):
    """A model at our shape with its loss: ours (output_layer_loss), HF Marian (`hf`), nn.Transformer (`torch`)."""

    def __init__(self, kind: str, shape: Shape, vocab: int = V, positions: int = 256, dropout: float = 0.1) -> None:
        super().__init__()
        self.kind = kind
        if kind == "ours":
            from transformer_mt.model import Transformer

            self.model = Transformer(config_of(shape, vocab))
        elif kind == "hf":
            import transformers

            self.model = transformers.MarianMTModel(transformers.MarianConfig(
                vocab_size=vocab, decoder_vocab_size=vocab, d_model=shape.d, encoder_layers=shape.layers,
                decoder_layers=shape.layers, encoder_attention_heads=shape.heads, decoder_attention_heads=shape.heads,
                encoder_ffn_dim=shape.ff, decoder_ffn_dim=shape.ff, activation_function="relu", dropout=dropout,
                max_position_embeddings=positions, scale_embedding=True, pad_token_id=PAD, decoder_start_token_id=BOS))
        else:
            from transformer_mt.model.embedding import sinusoid_table

            self.embed = nn.Embedding(vocab, shape.d, padding_idx=PAD)
            self.register_buffer("pos", sinusoid_table(positions, shape.d), persistent=False)
            self.core = nn.Transformer(shape.d, shape.heads, shape.layers, shape.layers, shape.ff, dropout=dropout,
                                       batch_first=True)
            self.out = nn.Linear(shape.d, vocab, bias=False)
            self.out.weight = self.embed.weight

    def forward(self, src, tgt_in):
        if self.kind == "hf":
            return self.model(input_ids=src, decoder_input_ids=tgt_in).logits
        s, t = (self.embed(x) * math.sqrt(self.embed.embedding_dim) + self.pos[: x.size(1)] for x in (src, tgt_in))
        mask = nn.Transformer.generate_square_subsequent_mask(tgt_in.size(1), device=src.device)
        return self.out(self.core(s, t, tgt_mask=mask, tgt_is_causal=True))

    def loss(self, src, tgt_in, tgt_out):
        from transformer_mt.training.loss import label_smoothed_nll_loss, output_layer_loss

        if self.kind != "ours":
            return label_smoothed_nll_loss(self(src, tgt_in), tgt_out, 0.1, PAD)
        out = self.model.output_proj
        return output_layer_loss(self.model.features(src, tgt_in), out.weight, out.bias, tgt_out, 0.1, PAD)


def matmul_peak(device: str, dtype: torch.dtype | None, n: int = 2048, reps: int = 10) -> float:
    a, b = (torch.randn(n, n, device=device, dtype=dtype or torch.float32) for _ in range(2))
    harness.timed(lambda: [a @ b for _ in range(2)], device)
    return 2 * n**3 * reps / harness.timed(lambda: [a @ b for _ in range(reps)], device)[0]


def fixed_steps(systems: dict[str, System], shape: Shape, steps: int, device: str, dtype) -> dict[str, dict]:
    """2 warm-up and `steps` timed steps of each system on one batch, in turns: seconds, first loss."""
    gen = torch.Generator().manual_seed(0)
    src = torch.randint(4, V, (shape.batch, shape.length), generator=gen).to(device)
    tgt = torch.randint(4, V, (shape.batch, shape.length + 1), generator=gen).to(device)
    tgt[:, 0] = BOS
    out = {name: {"seconds": [], "first_loss": None} for name in systems}
    optimizers = {name: torch.optim.Adam(model.to(device).train().parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9,
                                         fused=True) for name, model in systems.items()}

    def step(name: str) -> float:
        with torch.autocast(device.split(":")[0], dtype=dtype or torch.float32, enabled=dtype is not None):
            loss_sum, _, ntokens = systems[name].loss(src, tgt[:, :-1], tgt[:, 1:])
        (loss_sum / ntokens).backward()
        optimizers[name].step()
        optimizers[name].zero_grad(set_to_none=True)
        return float(loss_sum / ntokens)

    for number in range(steps + 2):
        for name in harness.order(list(systems), number):
            seconds, loss = harness.timed(lambda n=name: step(n), device)
            out[name]["seconds"] += [seconds] if number >= 2 else []
            out[name]["first_loss"] = loss if out[name]["first_loss"] is None else out[name]["first_loss"]
    return out


def against_peers(args) -> dict:
    from transformer_mt.markdown import markdown_table
    from transformer_mt.model.flops import training_flops

    rows = []
    for name, precision in ((name, precision) for name in args.shape for precision in args.precision):
        shape, tokens, peak = SHAPES[name], SHAPES[name].batch * SHAPES[name].length, matmul_peak(
            args.device, DTYPES[precision])
        flops = training_flops(config_of(shape), tokens, tokens, shape.length, shape.length)
        torch.manual_seed(0)
        systems = {label: System(kind, shape) for label, kind in (("ours", "ours"), ("HF MarianMTModel", "hf"),
                                                                   ("torch nn.Transformer", "torch"))}
        rate = {label: tokens * len(s["seconds"]) / sum(s["seconds"])
                for label, s in fixed_steps(systems, shape, args.steps, args.device, DTYPES[precision]).items()}
        rows += [{"shape": name, "precision": precision, "system": label, "target_tokens_per_s": r,
                  "ours_over_this": rate["ours"] / r, "mfu": flops * r / tokens / peak} for label, r in rate.items()]
        print(f"### {name}, {precision}: {harness.described(harness.machine(args.device))}, measured matmul peak "
              f"{peak / 1e12:.2f} TFLOP/s, model FLOPs per step {flops / 1e9:.1f} G\n\n" + markdown_table(
                  ["system", "target tokens/s", "ours / this", "MFU vs measured peak"],
                  [[r["system"], f"{r['target_tokens_per_s']:.0f}", f"{r['ours_over_this']:.2f}", f"{r['mfu']:.1%}"]
                   for r in rows[-3:]], right=(1, 2, 3)) + "\n")
    return {**harness.machine(args.device), "rows": rows}


def against_previous(args) -> dict:
    """--previous: each shape in both checkouts, a fresh process each a round: median steps, first losses."""
    from transformer_mt.markdown import markdown_table

    checkouts, results = {"this": harness.ROOT, "previous": args.previous.resolve()}, {}
    columns = ["shape", "this: median step ms", "previous: median step ms", "previous / this", "first loss this",
               "first loss previous"]
    print(f"{harness.described(harness.machine())}\n\n{markdown_table(columns, [], right=range(1, 6))}", flush=True)
    for shape in args.shape:
        command = [sys.executable, __file__, shape, str(args.steps)]
        runs = {name: lambda f=folder, c=command: json.loads(harness.in_process(c, env={
            **os.environ, "PYTHONPATH": str(f / "src")}).splitlines()[-1]) for name, folder in checkouts.items()}
        measured = harness.rounds(runs, args.rounds, f"train_speed {shape}")
        ms = {name: 1000 * statistics.median(s for m in measured for s in m[name]["seconds"]) for name in checkouts}
        first = {name: measured[-1][name]["first_loss"] for name in checkouts}
        results[shape] = {"this_ms": ms["this"], "previous_ms": ms["previous"], "ratio": ms["previous"] / ms["this"],
                          "first_loss": first, "steps_per_checkout": args.steps * args.rounds}
        print(markdown_table(columns, [[shape, f"{ms['this']:.1f}", f"{ms['previous']:.1f}",
                                        f"{results[shape]['ratio']:.3f}", f"{first['this']:.6f}",
                                        f"{first['previous']:.6f}"]]).splitlines()[-1], flush=True)
    return results


if __name__ == "__main__":  # SHAPE STEPS: one checkout's process of --previous (its src first on PYTHONPATH)
    torch.manual_seed(0)
    shape = SHAPES[sys.argv[1]]
    print(json.dumps(fixed_steps({"ours": System("ours", shape)}, shape, int(sys.argv[2]), "cpu", None)["ours"]))
