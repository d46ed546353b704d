"""Data preparation (README.md): --what scale, each phase's time and peak memory on a synthetic corpus of WMT14's
shape (--news: type-rich), a fresh process a size; --what multi30k, $DATA_DIR's Multi30k."""

import argparse
import itertools
import json
import logging
import os
import random
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path

import harness
import numpy as np

from transformer_mt.data.batching import TokenBudgetBatchSampler
from transformer_mt.data.corpus import TextFileCorpus
from transformer_mt.data.datamodule import TranslationDataModule
from transformer_mt.data.tokenizer import TokenizerOptions
from transformer_mt.markdown import markdown_table

SYLLABLES = np.array([c + v for c in "bdfgklmnprstvz" for v in "aeiou"] + ["sch", "ung", "er", "ein"])


def words(rng: np.random.Generator, count: int) -> np.ndarray:
    return np.array(["".join(rng.choice(SYLLABLES, n)) for n in rng.integers(1, 5, size=count)])


def distinct_words(rng: np.random.Generator, count: int) -> np.ndarray:
    """`count` distinct made-up words of 2 to 6 syllables, shorter ones first (the frequent ones)."""
    made: dict[str, None] = {}
    while len(made) < count:
        n = 2 * (count - len(made))
        lengths = np.sort(np.minimum(1 + rng.geometric(0.35, size=n), 6))
        parts = SYLLABLES[rng.integers(0, len(SYLLABLES), size=(n, 6))]
        drawn = parts[:, 0]
        for k in range(1, 6):
            drawn = np.char.add(drawn, np.where(k < lengths, parts[:, k], ""))
        made.update(dict.fromkeys(drawn.tolist()))
    return np.array(list(made)[:count])


def write_corpus(folder: Path, pairs: int, news: bool = False, seed: int = 0) -> None:
    """train / val / test (3,000) .en / .de of Zipf-distributed made-up words (60k a language, frequency ~ 1 / rank;
    `news`: 5M, ~ 1 / rank**1.2), the target a word-for-word image of the source, its last word moved first."""
    rng = np.random.default_rng(seed)
    vocab, exponent, make = (5_000_000, 1.2, distinct_words) if news else (60_000, 1.0, words)
    src_words, tgt_words = make(rng, vocab), make(rng, vocab)
    weights = 1.0 / np.arange(1, vocab + 1) ** exponent
    weights /= weights.sum()
    folder.mkdir(parents=True, exist_ok=True)
    for split, count in {"train": pairs, "val": 3000, "test": 3000}.items():
        with open(folder / f"{split}.en", "w") as en, open(folder / f"{split}.de", "w") as de:
            for start in range(0, count, 100_000):
                n = min(100_000, count - start)
                lengths = np.clip(rng.normal(25, 8, n).astype(int), 3, 80)
                ids = rng.choice(vocab, size=int(lengths.sum()), p=weights)
                for sentence in np.split(ids, np.cumsum(lengths)[:-1]):
                    en.write(" ".join(src_words[sentence]) + ".\n")
                    de.write(" ".join(tgt_words[np.roll(sentence, 1)]) + ".\n")


class AnonPeak(threading.Thread):
    """This process's highest RssAnon (MB: without the pages of files it maps), read every 0.25 s while `running`."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak, self.running = 0.0, True

    def run(self) -> None:
        while self.running:
            status = Path("/proc/self/status").read_text()
            self.peak = max(self.peak, int(status.split("RssAnon:")[1].split()[0]) / 1024)
            time.sleep(0.25)


def copy_corpus(corpus_dir: str, folder: Path, first: int, last: int) -> None:
    """Training lines first..last-1 of the corpus in `corpus_dir`, and all of val and test, into `folder`."""
    folder.mkdir()
    for split, lang in itertools.product(("train", "val", "test"), ("en", "de")):
        with open(f"{corpus_dir}/{split}.{lang}") as src, open(folder / f"{split}.{lang}", "w") as dst:
            dst.writelines(itertools.islice(src, first, last) if split == "train" else src)


def prepare(corpus_dir: str, pairs: int, args) -> dict:
    """The first `pairs` pairs prepared as a run does (as --corpora corpora): phase seconds, peak memory."""
    marks: dict[str, float] = {}

    class Marks(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            text = record.getMessage()
            if text.startswith("training ") and "vocabular" in text:  # a joint vocabulary, separate vocabularies
                marks["tokenizer"] = time.perf_counter()

    logging.getLogger("transformer_mt").addHandler(Marks())
    logging.getLogger("transformer_mt").setLevel(logging.INFO)
    with tempfile.TemporaryDirectory() as cache:
        folders = [Path(cache) / f"corpus{k}" for k in range(args.corpora)]
        for k, folder in enumerate(folders):
            copy_corpus(corpus_dir, folder, k * pairs // args.corpora, (k + 1) * pairs // args.corpora)
        corpora = {f"c{k}": TextFileCorpus(str(f), "en", "de", tag="bt" if k == 1 else None)
                   for k, f in enumerate(folders)}
        anon = AnonPeak()
        anon.start()
        start = time.perf_counter()
        sample = {"train_sample": args.train_sample} if args.train_sample else {}
        dm = TranslationDataModule(corpora, TokenizerOptions(vocab_size=37000, **sample), cache_dir=f"{cache}/cache",
                                   max_tokens=25000, max_len=256, num_proc=args.num_proc)
        dm.vocabularies()  # trained (or found) on the first call
        built = time.perf_counter()
        dm.prepare_data()
        encoded = time.perf_counter()
        dm.setup("fit")
        next(iter(dm.train_dataloader()))
        anon.running = False
        return {"pairs": pairs, "text_mb": sum(p.stat().st_size for f in folders for p in f.glob("train.*")) / 2**20,
                "check_s": marks["tokenizer"] - start, "tokenizer_s": built - marks["tokenizer"],
                "encode_s": encoded - built, "first_batch_s": time.perf_counter() - encoded,
                "total_s": time.perf_counter() - start, "peak_anon_mb": anon.peak,
                "peak_mb": max(resource.getrusage(who).ru_maxrss / 1024
                               for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))}


def scale(args) -> None:
    with tempfile.TemporaryDirectory() as corpus:
        started = time.perf_counter()
        write_corpus(Path(corpus), max(args.sizes), args.news)
        print(f"wrote {max(args.sizes):,} pairs in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        columns = ["pairs", "text (MB)", "check + sample (s)", "tokenizer (s)", "encode (s)", "first batch (s)",
                   "total (s)", "peak RSS (MB)", "peak RssAnon (MB)"]
        print(harness.described(harness.machine()) + "\n")
        print(markdown_table(columns, [], right=range(9)), flush=True)  # then a row per size as it comes
        for size in args.sizes:
            r = json.loads(harness.in_process([
                sys.executable, __file__, "--num-proc", str(args.num_proc), "--corpora", str(args.corpora),
                *(["--train-sample", str(args.train_sample)] if args.train_sample else []),
                "--child", corpus, str(size)]).splitlines()[-1])
            cells = [f"{r['pairs']:,}", f"{r['text_mb']:,.0f}", f"{r['check_s']:.0f}", f"{r['tokenizer_s']:.0f}",
                     f"{r['encode_s']:.0f}", f"{r['first_batch_s']:.0f}", f"{r['total_s']:.0f}",
                     f"{r['peak_mb']:,.0f}", f"{r['peak_anon_mb']:,.0f}"]
            print(markdown_table(columns, [cells]).splitlines()[-1], flush=True)


def multi30k(args) -> None:
    """Multi30k: prepare cold and warm, encoding (--num-proc), token-budget against random batches."""
    corpus = TextFileCorpus(f"{os.environ.get('DATA_DIR', 'data')}/multi30k", "en", "de",
                            {"train": "train", "val": "val", "test": "test2016"})
    train = corpus.load("train")
    print(f"Multi30k en-de: {len(train)} training pairs; {harness.described(harness.machine())}\n")

    def prepared(cache: Path, num_proc: int = 1, vocabularies=None) -> tuple[float, TranslationDataModule]:
        start = time.perf_counter()
        dm = TranslationDataModule({"multi30k": corpus}, TokenizerOptions(vocab_size=8000), cache_dir=str(cache),
                                   num_proc=num_proc, max_tokens=4096, vocabularies=vocabularies)
        dm.prepare_data()
        if vocabularies is None:
            dm.setup("fit")
        return time.perf_counter() - start, dm

    with tempfile.TemporaryDirectory() as tmp:
        cold, _ = prepared(Path(tmp) / "a")
        warm, dm = prepared(Path(tmp) / "a")
        vocab = dm.vocabularies()
        print(markdown_table(["step", "seconds"], [
            ["prepare train + val, cold (BPE training + encoding + Arrow cache)", f"{cold:.2f}"],
            ["prepare train + val, warm (cache hit)", f"{warm:.2f}"], ["warm / cold", f"{warm / cold:.3f}"]],
            right=(1,)) + "\n")
        sentences = 2 * sum(len(corpus.load(split)) for split in ("train", "val", "test"))
        rows = [[f"streamed, data.num_proc={n}", f"{sentences / prepared(Path(tmp) / str(n), n, vocab)[0]:,.0f}"]
                for n in sorted({1, args.num_proc})]
        print(markdown_table(["encoding (train + val + test, vocabularies given)", "sentences/s"], rows,
                             right=(1,)) + "\n")
    sizes = [max(len(s) + 1, len(t) + 1) for s, t in zip(vocab.src.encode(train.src), vocab.tgt.encode(train.tgt))]
    budget = TokenBudgetBatchSampler(sizes, 4096, shuffle=True, seed=0)
    order = list(range(len(sizes)))
    random.Random(0).shuffle(order)
    per_batch = max(1, round(len(sizes) / len(budget)))  # as many batches as the token budget's
    fixed = [order[i : i + per_batch] for i in range(0, len(order), per_batch)]
    fixed_padding = 1 - sum(sizes) / sum(len(b) * max(sizes[i] for i in b) for b in fixed)
    print(markdown_table(["batching (4096 padded tokens)", "batches", "padding"], [
        ["token budget, length buckets", len(budget), f"{100 * budget.padding_fraction():.1f}%"],
        [f"{per_batch} random sentences per batch", len(fixed), f"{100 * fixed_padding:.1f}%"]], right=(1, 2)))


def main() -> None:
    parser = harness.parser(__doc__, with_json=False)
    add = parser.add_argument
    add("--what", choices=["scale", "multi30k"], default="scale")
    add("--sizes", type=int, nargs="+", default=[450_000, 1_500_000, 4_500_000], help="scale: the corpus sizes")
    add("--num-proc", type=int, default=1, help="data.num_proc")
    add("--train-sample", type=int, help="scale: data.tokenizer.train_sample (default: its default)")
    add("--corpora", type=int, default=1, help="scale: each size as this many corpora of equal size")
    add("--news", action="store_true", help="scale: a type-rich corpus (a million distinct words a side in 1M lines)")
    add("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(prepare(args.child[0], int(args.child[1]), args)))
    else:
        (multi30k if args.what == "multi30k" else scale)(args)


if __name__ == "__main__":
    main()
