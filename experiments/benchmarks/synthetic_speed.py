"""Translating a corpus for a pipeline (task=distill's and task=backtranslate's synthetic stage)
against task=translate on the same lines, the same model and decoding, in one process: lines per
second of each (best of --repeat rounds, taking turns, the first one alternating), their ratio,
whether the outputs are equal, and what the synthetic stage's rate means at Multi30k size (29,000
lines) and WMT14 size (4.5M).

    python experiments/benchmarks/synthetic_speed.py --ckpt experiments/multi30k/multi30k_en_de.ckpt \\
        --source $DATA_DIR/multi30k/train.en --limit 2000 [--beam 5] [--chunk-lines 1000] [--repeat 2] \\
        [--devices 2]

task=translate's path is `translate_lines` over the input in lists of 1,000 lines (inference/line_translation.py);
the synthetic stage's is `write_synthetic` (chunks written atomically, then joined), with --devices N
on N CPU processes that share the threads (trainer.accelerator=cpu trainer.devices=N).
"""

import argparse
import tempfile
import time
from functools import partial
from pathlib import Path

import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from transformer_mt.config import plain
from transformer_mt.data.corpus import read_lines
from transformer_mt.inference.line_translation import translate_lines
from transformer_mt.inference.members import load_translator
from transformer_mt.markdown import markdown_table
from transformer_mt.tasks.lines.reading import line_chunks
from transformer_mt.tasks.pipelines.stage_work import file_sources
from transformer_mt.tasks.pipelines.synthetic import TranslationSettings, write_synthetic

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ckpt", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--limit", type=int, default=2000)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--chunk-lines", type=int, default=1000)
    parser.add_argument("--max-tokens", type=int, default=4096)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--devices", type=int, default=1, help="the synthetic stage's CPU processes")
    args = parser.parse_args()
    lines = read_lines(args.source)[: args.limit]
    decoding = OmegaConf.load(ROOT / "conf" / "decoding" / "beam.yaml")  # task=distill's teacher_decoding
    decoding.beam_size, decoding.length_norm.alpha = args.beam, 1.0
    module = load_translator([Path(args.ckpt)], instantiate(decoding))
    best = {"task=translate": float("inf"), "synthetic stage": float("inf")}
    outputs = {}
    def translate() -> list[str]:
        return [n[0].text for chunk in line_chunks(lines) for n in translate_lines(module, chunk, args.max_tokens)]

    translation = TranslationSettings((Path(args.ckpt),), plain(decoding), None, None, args.max_tokens,
                                      args.chunk_lines, 0)

    def synthetic() -> list[str]:
        with tempfile.TemporaryDirectory() as folder:
            source = Path(folder) / "source.txt"
            source.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
            write_synthetic(translation, partial(file_sources, source), Path(folder), ("in", "out"),
                            [torch.device("cpu")] * args.devices, progress=False)
            return (Path(folder) / "train.out").read_text().splitlines()

    systems = {"task=translate": translate, "synthetic stage": synthetic}
    for round_ in range(args.repeat):  # the systems take turns, the first one alternating
        for name in list(systems)[:: 1 if round_ % 2 == 0 else -1]:
            start = time.perf_counter()
            outputs[name] = systems[name]()
            best[name] = min(best[name], time.perf_counter() - start)
    rate = {name: len(lines) / seconds for name, seconds in best.items()}
    print(f"{len(lines)} lines of {args.source}, beam {args.beam}, chunks of {args.chunk_lines} lines, "
          f"the synthetic stage on {args.devices} CPU process(es), {torch.get_num_threads()} threads in all")
    print(markdown_table(["system", "seconds", "lines/s"],
                         [[name, f"{seconds:.1f}", f"{rate[name]:.1f}"] for name, seconds in best.items()],
                         right=(1, 2)))
    same = sum(a == b for a, b in zip(outputs["task=translate"], outputs["synthetic stage"]))
    print(f"synthetic stage / task=translate: {rate['synthetic stage'] / rate['task=translate']:.3f}x; "
          f"{same} of {len(lines)} outputs equal")
    for name, size in (("Multi30k", 29_000), ("WMT14", 4_500_000)):
        print(f"at {name} size ({size:,} lines): {size / rate['synthetic stage'] / 3600:.2f} hours")


if __name__ == "__main__":
    main()
