"""Encoding a stream of sentence pairs into token ids, a chunk at a time, in this process or in
worker processes, with reading overlapped with encoding."""

import json
import logging
import multiprocessing
import os
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from pathlib import Path
from queue import Full, Queue

import datasets
from datasets.arrow_writer import ArrowWriter

from transformer_mt.data.corpus import Chunk, CleanPairs
from transformer_mt.data.tokenizer import Vocabularies
from transformer_mt.errors import DataError
from transformer_mt.progress import ProgressBar, wanted

IDS = {"src_ids": datasets.Sequence(datasets.Value("int32")), "tgt_ids": datasets.Sequence(datasets.Value("int32")),
       "src_len": datasets.Value("int32"), "tgt_len": datasets.Value("int32")}
TRAIN_FEATURES = datasets.Features(IDS)
log = logging.getLogger(__name__)
EVAL_FEATURES = datasets.Features({"src_text": datasets.Value("string"), "tgt_text": datasets.Value("string"), **IDS})


def encode_pairs(vocab: Vocabularies, src: list[str], tgt: list[str], max_len: int | None = None,
                 max_len_ratio: float | None = None, with_text: bool = False,
                 prefix: list[int] | None = None, target_prefix: list[int] | None = None) -> dict[str, list]:
    """Token ids and lengths of aligned sentences (with_text: the sentences too; prefix: ids put
    before every source, a corpus's tag; target_prefix: before every target, its target tag); with
    max_len (training), only the pairs whose sides have at most max_len tokens (the target with its
    EOS), the longer at most max_len_ratio times the shorter."""
    src_ids, tgt_ids = vocab.encode_sources(src, prefix or ()), vocab.tgt.encode(tgt)
    if target_prefix:
        tgt_ids = [[*target_prefix, *ids] for ids in tgt_ids]
    out = {"src_ids": src_ids, "tgt_ids": tgt_ids, "src_len": [len(s) for s in src_ids],
           "tgt_len": [len(t) for t in tgt_ids]}
    if with_text:
        out = {"src_text": src, "tgt_text": tgt, **out}
    if max_len is None:
        return out
    ratio = max_len_ratio
    keep = [i for i, (s, t) in enumerate(zip(out["src_len"], out["tgt_len"]))
            if s <= max_len and t + 1 <= max_len and (ratio is None or max(s, t) <= ratio * max(1, min(s, t)))]
    return {key: [values[i] for i in keep] for key, values in out.items()} if len(keep) < len(src_ids) else out


_worker_vocab: Vocabularies | None = None  # an encoding worker's vocabularies (set once, by init_worker)


def init_worker(vocab_json: str) -> None:
    """An encoding worker process: its vocabularies."""
    global _worker_vocab
    _worker_vocab = Vocabularies.from_dict(json.loads(vocab_json))


def encode_in_worker(job: tuple[list[str], list[str], dict]) -> dict[str, list]:
    src, tgt, options = job
    return encode_pairs(_worker_vocab, src, tgt, **options)


def read_ahead(items: Iterable, depth: int = 2) -> Iterator:
    """The items of `items`, made by a thread of their own up to `depth` items ahead, so that
    making them (reading and cleaning chunks; encoding them on tokenizers' threads, which release
    the GIL) overlaps the consumer's work (encoding; writing Arrow batches). An error of the maker
    (a bad line) is raised here, where the item it stopped at was expected; a consumer that stops
    early stops the thread at its next item."""
    done, stop = object(), threading.Event()
    queue: Queue = Queue(maxsize=depth)

    def put(item: object) -> bool:
        while not stop.is_set():
            try:
                queue.put(item, timeout=0.1)
                return True
            except Full:
                continue
        return False

    def make() -> None:
        try:
            for item in items:
                if not put(item):
                    return
            put(done)
        except BaseException as err:  # noqa: BLE001 - handed to the consumer
            put(err)

    maker = threading.Thread(target=make, daemon=True)
    maker.start()
    try:
        while (item := queue.get()) is not done:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
    maker.join()


@contextmanager
def encoding_workers(num_proc: int, vocab: Vocabularies) -> Iterator[Callable[[Iterable[tuple]], Iterator[dict]]]:
    """A function from (src, tgt, options) jobs to encoded chunks, in order: in this process (on
    tokenizers' threads), or with num_proc > 1 in that many worker processes holding the
    vocabularies (tokenizers' own threads off in them: one process, one core), at most two chunks
    per worker in flight. A worker that dies (out of memory) is one line naming data.num_proc."""
    if num_proc <= 1:
        yield lambda jobs: (encode_pairs(vocab, src, tgt, **options) for src, tgt, options in jobs)
        return
    previous = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # inherited by the workers
    context = multiprocessing.get_context("fork")
    try:
        with ProcessPoolExecutor(num_proc, context, init_worker, (json.dumps(vocab.to_dict()),)) as pool:
            def encode(jobs: Iterable[tuple]) -> Iterator[dict]:
                pending: deque = deque()
                try:
                    for job in jobs:
                        pending.append(pool.submit(encode_in_worker, job))
                        if len(pending) >= 2 * num_proc:
                            yield pending.popleft().result()
                    while pending:
                        yield pending.popleft().result()
                except BrokenProcessPool:
                    raise DataError(f"an encoding worker died (out of memory?) with data.num_proc={num_proc}: lower "
                                    "data.num_proc") from None

            yield encode
    finally:
        if previous is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = previous


def counted(pairs: CleanPairs, bar: ProgressBar) -> Iterator[Chunk]:
    """`pairs`' chunks, `bar` advanced by the pairs each one read (dropped ones included)."""
    seen = 0
    for chunk in pairs:
        bar.advance(pairs.stats["pairs"] - seen)
        seen = pairs.stats["pairs"]
        yield chunk
    bar.advance(pairs.stats["pairs"] - seen)


def pairs_bar(description: str, pairs: CleanPairs, progress: bool | None) -> ProgressBar:
    """A bar counting the pairs of `pairs` read (its total counted only when the bar is drawn)."""
    total = pairs.size() if pairs.size is not None and wanted(progress) else None
    return ProgressBar(description, total, "pairs", progress)


def encode_split(pairs: CleanPairs, path: Path, vocab: Vocabularies, train: bool, max_len: int,
                 max_len_ratio: float | None, num_proc: int, progress: bool | None,
                 prefix: list[int] | None = None, target_prefix: list[int] | None = None) -> int:
    """Stream a split into the Arrow file `path`: each chunk of pairs is encoded (tokenizers'
    batch encoding uses every core; with data.num_proc > 1, worker processes take chunks in turn,
    none holding more than its chunk), training pairs are filtered by length, and the token ids
    (and, for val / test, the text) are written at once. Memory holds a few chunks, whatever the
    corpus size. `prefix`: ids put before every source (a corpus's tag); `target_prefix`: before
    every target (its target_tag). Returns the number of pairs
    written."""
    limits = {"max_len": max_len, "max_len_ratio": max_len_ratio} if train else {"with_text": True}
    if prefix:
        limits["prefix"] = prefix
    if target_prefix:
        limits["target_prefix"] = target_prefix
    kept = 0
    try:
        features = TRAIN_FEATURES if train else EVAL_FEATURES
        with pairs_bar(f"{pairs.name}: encoding", pairs, progress) as bar, \
                ArrowWriter(features=features, path=str(path)) as writer, \
                encoding_workers(num_proc, vocab) as encode:
            jobs = ((src, tgt, limits) for src, tgt in read_ahead(counted(pairs, bar)))
            for batch in read_ahead(encode(jobs)):  # encoding the next chunk while this one is written
                writer.write_batch(batch)
                kept += len(batch["src_ids"])
            writer.finalize()
    except MemoryError:
        raise DataError(f"{pairs.name}: out of memory while encoding (data.num_proc={num_proc}): lower "
                        "data.num_proc") from None
    if train:
        total = pairs.stats["pairs"] - pairs.stats["empty_dropped"]
        log.info("%s: removed %d of %d training pairs by length (data.max_len=%d, data.max_len_ratio=%s)",
                 pairs.name, total - kept, total, max_len, max_len_ratio)
        if kept == 0:
            raise DataError(f"{pairs.name}: no training pairs left after filtering "
                            f"(data.max_len={max_len}, data.max_len_ratio={max_len_ratio})")
    return kept
