"""The training step of this checkout against an earlier one (a clone at another commit), on this
machine, in one run: the two take turns, each in a fresh process, round after round.

    python experiments/benchmarks/versus_previous.py --previous /path/to/older/clone
        [--shape base recipe] [--rounds 5] [--steps 6] [--threads N] [--json PATH]

Each process builds the Transformer of the shape (train_speed.py's: `base` is the paper's base
model on 64 x 24-token pairs, `recipe` experiment=multi30k_recipe's model on 256 x 16-token
pairs; a 10k vocabulary, random ids, no padding), seeds it the same, and times --steps training
steps (decoder states, the output layer + label-smoothed loss as each checkout trains,
backward, fused Adam) after two warm-up steps, in fp32 on the CPU. Only the API both checkouts
share is used (`Transformer.features`, `training.loss.output_layer_loss`). Prints, per shape, the
median step of each checkout over the rounds and the ratio previous / this (> 1: this is faster),
and the loss of the first step of each (equal up to float rounding when the maths is the same).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from transformer_mt.markdown import markdown_table

ROOT = Path(__file__).resolve().parents[2]

SHAPES = {"base": (512, 2048, 8, 6, 64, 24), "recipe": (128, 256, 4, 4, 256, 16)}

STEP = """
import json, sys, time, torch
from transformer_mt.model import Transformer, TransformerConfig
from transformer_mt.training.loss import output_layer_loss
d, ff, heads, layers, batch, length, steps = map(int, sys.argv[1:8])
torch.manual_seed(0)
model = Transformer(TransformerConfig(src_vocab_size=10000, tgt_vocab_size=10000, pad_id=0, d_model=d, d_ff=ff,
                                      heads=heads, num_encoder_layers=layers, num_decoder_layers=layers)).train()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=True)
g = torch.Generator().manual_seed(0)
src = torch.randint(4, 10000, (batch, length), generator=g)
tgt = torch.randint(4, 10000, (batch, length + 1), generator=g)
tgt[:, 0] = 1
seconds, first = [], None
for step in range(steps + 2):
    start = time.perf_counter()
    out = model.output_proj
    loss_sum, _, n = output_layer_loss(model.features(src, tgt[:, :-1]), out.weight, out.bias, tgt[:, 1:], 0.1, 0)
    (loss_sum / n).backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if step >= 2:
        seconds.append(time.perf_counter() - start)
    first = float(loss_sum / n) if first is None else first
print(json.dumps({"seconds": seconds, "first_loss": first}))
"""


def measure(checkout: Path, shape: str, steps: int, threads: int | None) -> dict:
    env = {**os.environ, "PYTHONPATH": str(checkout / "src")}
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    args = [str(x) for x in (*SHAPES[shape], steps)]
    result = subprocess.run([sys.executable, "-c", STEP, *args], env=env, capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--previous", type=Path, required=True, help="a clone of the project at an earlier commit")
    parser.add_argument("--shape", nargs="+", default=["recipe", "base"], choices=sorted(SHAPES))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=6, help="timed steps per process (after 2 warm-up steps)")
    parser.add_argument("--threads", type=int, help="OMP_NUM_THREADS of the processes (default: torch's)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    checkouts = {"this": ROOT, "previous": args.previous.resolve()}
    results = {}
    columns = ["shape", "this: median step ms", "previous: median step ms", "previous / this", "first loss this",
               "first loss previous"]
    print(markdown_table(columns, [], right=range(1, 6)), flush=True)  # then a row per shape as it comes
    for shape in args.shape:
        steps = {name: [] for name in checkouts}
        first = {}
        for round_ in range(args.rounds):
            order = list(checkouts) if round_ % 2 == 0 else list(checkouts)[::-1]  # each first in turn
            for name in order:
                measured = measure(checkouts[name], shape, args.steps, args.threads)
                steps[name] += measured["seconds"]
                first[name] = measured["first_loss"]
                print(f"[versus_previous] {shape} round {round_ + 1}: {name}", file=sys.stderr, flush=True)
        median = {name: 1000 * statistics.median(s) for name, s in steps.items()}
        ratio = median["previous"] / median["this"]
        results[shape] = {"this_ms": median["this"], "previous_ms": median["previous"], "ratio": ratio,
                          "first_loss": first, "steps_per_checkout": len(steps["this"])}
        cells = [shape, f"{median['this']:.1f}", f"{median['previous']:.1f}", f"{ratio:.3f}", f"{first['this']:.6f}",
                 f"{first['previous']:.6f}"]
        print(markdown_table(columns, [cells]).splitlines()[-1], flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
