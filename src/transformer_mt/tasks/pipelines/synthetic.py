"""A synthetic corpus: source lines translated by a model (a teacher's translations of the training
sources, or a reverse model's of target-side text), written in chunks of `chunk_lines`, each
atomically as chunks/NNNNN.in (the lines translated) and chunks/NNNNN.out (their translations,
written last: a chunk whose .out is there is done), then joined into two files, train.A (the lines)
and train.B. Killed anywhere, the same call goes on at the first chunk not done; each chunk's
decoding is seeded from (seed, chunk), so sampling gives the corpus an uninterrupted run gives. On
several devices (trainer.devices > 1), device k of N translates chunks k, k + N, ... in a process of
its own (tasks/pipelines/shards.py); the corpus is the same, in input order. Lines stream through:
memory holds one chunk."""

import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from itertools import islice
from pathlib import Path

import torch

from transformer_mt.atomic import atomic_file
from transformer_mt.inference.long_lines import LongLines
from transformer_mt.inference.workers import Workers
from transformer_mt.progress import ProgressBar
from transformer_mt.tasks.pipelines.shards import run_on_devices

log = logging.getLogger(__name__)

# what a synthetic stage translates: (its lines in chunks, their number when known); a top-level
# function or a partial of one, so that a process of its own can call it again
Sources = Callable[[], tuple[Iterable[list[str]], int | None]]


@dataclass(frozen=True)
class TranslationSettings:
    """How the lines are translated: the model (several checkpoints: an ensemble), its decoding and
    int8 rule, the tag put before every source (task.tag), the batches' token budget, the chunk
    size and the seed the chunks' seeds come from."""
    models: tuple[Path, ...]
    decoding: dict
    quantize: str | None
    tag: str | None
    max_tokens: int
    chunk_lines: int
    seed: int
    engine: str = "ours"  # task.engine: ours | ctranslate2
    inter_threads: int | None = None  # the keys inter_threads, intra_threads (inference/workers.py)
    intra_threads: int | None = None
    kernels: str | None = None  # the key kernels (model/kernels.py)
    ct2_dir: str | None = None  # task.ct2_dir: where task.engine=ctranslate2 converts (not in the fingerprint)


def lines_in_chunks(chunks: Iterable[list[str]], size: int) -> Iterator[list[str]]:
    """The lines of `chunks` again, in chunks of `size` (the last one shorter)."""
    lines = (line for chunk in chunks for line in chunk)
    while chunk := list(islice(lines, size)):
        yield chunk


def chunk_seed(seed: int, index: int) -> int:
    """The decoding seed of chunk `index`: the same whether the chunk is decoded first or after a resume."""
    return (seed * 1_000_003 + index) % (2**63)


def write_synthetic(translation: TranslationSettings, sources: Sources, folder: Path, names: tuple[str, str],
                    devices: list[torch.device], progress: bool | None) -> int:
    """Translate the lines of `sources()` into folder/train.{names[0]} (the sources) and
    folder/train.{names[1]} (their translations) on `devices`; a source line longer than the model
    takes gets an empty translation (the pair is then dropped from training) and is counted. The
    lines written."""
    chunks_dir = folder / "chunks"
    chunks_dir.mkdir(parents=True, exist_ok=True)
    resumed = len(list(chunks_dir.glob("*.out")))
    work = partial(translate_chunks, translation, sources, chunks_dir)
    with ProgressBar("translating", sources()[1], "lines", progress) as bar:
        if len(devices) == 1:
            work(0, 1, devices[0], bar)
        else:
            counted: set[Path] = set()
            run_on_devices(work, devices, lambda: advance(bar, chunks_dir, counted))
    if resumed:
        log.info("synthetic corpus: %d chunks were done already (%s), the others translated now", resumed, chunks_dir)
    return join(chunks_dir, folder, names)


def translate_chunks(translation: TranslationSettings, sources: Sources, chunks_dir: Path, rank: int, world: int,
                     device: torch.device, bar: ProgressBar | None = None) -> None:
    """Chunks rank, rank + world, ... of `sources()` that are not done, translated on `device`, each
    written atomically (`bar`: advanced by every chunk of this rank, done before or now)."""
    from hydra.utils import instantiate

    from transformer_mt.inference.members import load_translator

    search = instantiate(translation.decoding)
    translator = load_translator(list(translation.models), search, translation.quantize or "none",
                                 kernels=translation.kernels)
    workers = Workers.for_device(translation.inter_threads, translation.intra_threads, device,
                                 torch.get_num_threads())  # this process's share of the cores
    if translation.engine == "ctranslate2":
        from transformer_mt.inference.ct2_engine import ct2_translator

        translator = ct2_translator(translation.models[0], translator, device, workers, translation.ct2_dir)
    else:
        translator.to(device)
    prefix = translator.tokenizer.source_prefix(translation.tag, "task.tag")
    long_lines, seen, translated = LongLines("skip"), 0, 0
    with workers:
        for index, lines in enumerate(lines_in_chunks(sources()[0], translation.chunk_lines)):
            if index % world == rank and not (chunks_dir / f"{index:05d}.out").is_file():
                translated += translate_chunk(translator, translation, lines, index, seen, chunks_dir, bar,
                                              long_lines, prefix, workers)
            elif index % world == rank and bar is not None:
                bar.advance(len(lines))
            seen += len(lines)
    long_lines.report(translated)


def translate_chunk(translator, translation: TranslationSettings, lines: list[str], index: int, seen: int,
                    chunks_dir: Path, bar: ProgressBar | None, long_lines: LongLines, prefix: list[int],
                    workers: Workers) -> int:
    """Chunk `index` (its `lines`, after `seen` others) translated into chunks_dir, its sources and
    translations each written atomically; the lines translated."""
    from transformer_mt.inference.line_translation import translate_lines

    torch.manual_seed(chunk_seed(translation.seed, index))  # sampling's draws (CTranslate2's too)
    if translation.engine == "ctranslate2":
        translator.reseed(chunk_seed(translation.seed, index))
    nbests = translate_lines(translator, lines, translation.max_tokens, first_line=seen + 1, bar=bar,
                             name="synthetic sources", long_lines=long_lines, source_prefix=prefix, workers=workers)
    write_lines(chunks_dir / f"{index:05d}.in", lines)
    write_lines(chunks_dir / f"{index:05d}.out", [nbest[0].text for nbest in nbests])
    return len(lines)


def advance(bar: ProgressBar, chunks_dir: Path, counted: set[Path]) -> None:
    """`bar` advanced by the lines of the chunks done since it last looked (the other processes' work)."""
    for done in sorted(set(chunks_dir.glob("*.out")) - counted):
        bar.advance(len(done.read_text(encoding="utf-8").splitlines()))
        counted.add(done)


def write_lines(path: Path, lines: list[str]) -> None:
    with atomic_file(path) as tmp:
        tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def join(chunks_dir: Path, folder: Path, names: tuple[str, str]) -> int:
    """folder/train.{names[0]} and train.{names[1]}: the chunks' lines and translations end to end.
    The lines written."""
    lines = 0
    for suffix, name in zip(("in", "out"), names):
        with atomic_file(folder / f"train.{name}") as tmp, open(tmp, "w", encoding="utf-8") as out:
            for part in sorted(chunks_dir.glob(f"*.{suffix}")):
                text = part.read_text(encoding="utf-8")
                out.write(text)
                lines += text.count("\n") if suffix == "in" else 0
    return lines
