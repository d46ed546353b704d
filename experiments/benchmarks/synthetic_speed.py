"""A pipeline's synthetic stage (task=distill's, task=backtranslate's) against task=translate on the
same lines, model and decoding, in one process.

    python experiments/benchmarks/synthetic_speed.py --ckpt experiments/multi30k/multi30k_en_de.ckpt \
        --source $DATA_DIR/multi30k/train.en --limit 2000 [--beam 5] [--chunk-lines 1000] [--repeat 2] [--devices 2]

task=translate's path (`translate_lines` over lists of 1,000 lines) and the stage's (`write_synthetic`
on --devices CPU processes), taking turns (harness.py): lines/s of each (best of --repeat), the
ratio, equal outputs, and what the stage's rate means at Multi30k and WMT14 sizes.
"""

import tempfile
from functools import partial
from pathlib import Path

import harness
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from transformer_mt.config import plain
from transformer_mt.data.corpus import read_lines
from transformer_mt.inference.line_translation import translate_lines
from transformer_mt.inference.members import load_translator
from transformer_mt.markdown import markdown_table
from transformer_mt.schema.search_keys import BeamNode
from transformer_mt.tasks.lines.reading import line_chunks
from transformer_mt.tasks.pipelines.stage_work import file_sources
from transformer_mt.tasks.pipelines.synthetic import TranslationSettings, write_synthetic


def main() -> None:
    parser = harness.parser(__doc__, with_json=False)
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
    decoding = OmegaConf.structured(BeamNode)  # decoding=beam: task=distill's teacher_decoding
    decoding.beam_size, decoding.length_norm.alpha = args.beam, 1.0
    module = load_translator([Path(args.ckpt)], instantiate(decoding))
    translation = TranslationSettings((Path(args.ckpt),), plain(decoding), None, None, args.max_tokens,
                                      args.chunk_lines, 0)

    def translate() -> list[str]:
        return [n[0].text for chunk in line_chunks(lines) for n in translate_lines(module, chunk, args.max_tokens)]

    def synthetic() -> list[str]:
        with tempfile.TemporaryDirectory() as folder:
            source = Path(folder) / "source.txt"
            source.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
            write_synthetic(translation, partial(file_sources, source), Path(folder), ("in", "out"),
                            [torch.device("cpu")] * args.devices, progress=False)
            return (Path(folder) / "train.out").read_text().splitlines()

    measured = harness.rounds({"task=translate": partial(harness.timed, translate),
                               "synthetic stage": partial(harness.timed, synthetic)}, args.repeat, "synthetic_speed")
    best = harness.best(measured, lambda timed: timed[0])
    rate = {name: len(lines) / seconds for name, seconds in best.items()}
    print(f"{len(lines)} lines of {args.source}, beam {args.beam}, chunks of {args.chunk_lines} lines, the synthetic "
          f"stage on {args.devices} CPU process(es); {harness.described(harness.machine())}")
    print(markdown_table(["system", "seconds", "lines/s"],
                         [[name, f"{seconds:.1f}", f"{rate[name]:.1f}"] for name, seconds in best.items()],
                         right=(1, 2)))
    same = sum(a == b for a, b in zip(measured[-1]["task=translate"][1], measured[-1]["synthetic stage"][1]))
    print(f"synthetic stage / task=translate: {rate['synthetic stage'] / rate['task=translate']:.3f}x; "
          f"{same} of {len(lines)} outputs equal")
    for name, size in (("Multi30k", 29_000), ("WMT14", 4_500_000)):
        print(f"at {name} size ({size:,} lines): {size / rate['synthetic stage'] / 3600:.2f} hours")


if __name__ == "__main__":
    main()
