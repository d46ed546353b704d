"""Data preparation at WMT scale: wall time of each phase and peak memory, for corpora of growing size.

    python experiments/benchmarks/data_scale.py [--sizes 450000 1500000 4500000] [--num-proc 1] [--news]
        [--train-sample PAIRS] [--corpora K]

A synthetic corpus of WMT14 en-de's shape (a Zipf vocabulary of 60k made-up words a language; --news:
5M, type-rich as news text is), written once; each size (its first lines) prepared in a fresh
process as a run does, cold cache, a 37k joint BPE: the check and sample pass, the tokenizer,
encoding, the first batch; peak RSS and RssAnon. --corpora K: the size as K corpora (the second
tagged); --train-sample: data.tokenizer.train_sample.
"""

import argparse
import json
import logging
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path

import harness
import numpy as np

from transformer_mt.markdown import markdown_table

EVAL_PAIRS = 3000  # val and test


def words(rng: np.random.Generator, count: int) -> np.ndarray:
    """`count` made-up words of 1 to 4 syllables."""
    syllables = np.array([c + v for c in "bdfgklmnprstvz" for v in "aeiou"] + ["sch", "ung", "er", "ein"])
    lengths = rng.integers(1, 5, size=count)
    return np.array(["".join(rng.choice(syllables, n)) for n in lengths])


def distinct_words(rng: np.random.Generator, count: int) -> np.ndarray:
    """`count` distinct made-up words of 2 to 6 syllables, shorter ones first (the frequent ones)."""
    syllables = np.array([c + v for c in "bdfgklmnprstvz" for v in "aeiou"] + ["sch", "ung", "er", "ein"])
    made: dict[str, None] = {}
    while len(made) < count:
        n = 2 * (count - len(made))
        lengths = np.sort(np.minimum(1 + rng.geometric(0.35, size=n), 6))
        parts = syllables[rng.integers(0, len(syllables), size=(n, 6))]
        drawn = parts[:, 0]
        for k in range(1, 6):
            drawn = np.char.add(drawn, np.where(k < lengths, parts[:, k], ""))
        made.update(dict.fromkeys(drawn.tolist()))
    return np.array(list(made)[:count])


def write_corpus(folder: Path, pairs: int, news: bool = False, seed: int = 0) -> None:
    """train / val / test .en / .de: sentences of Zipf-distributed words, the target a word-for-word
    image of the source (another vocabulary) with its last word moved to the front. The words: 60k
    made-up ones per language, frequency ~ 1 / rank; `news`: 5M, frequency ~ 1 / rank**1.2, about
    a million distinct words a side in 1M lines, as news text has (a small lexicon hides what the
    tokenizer trainer's memory does on those)."""
    rng = np.random.default_rng(seed)
    vocab, exponent, make = (5_000_000, 1.2, distinct_words) if news else (60_000, 1.0, words)
    src_words, tgt_words = make(rng, vocab), make(rng, vocab)
    weights = 1.0 / np.arange(1, vocab + 1) ** exponent
    weights /= weights.sum()
    folder.mkdir(parents=True, exist_ok=True)
    splits = {"train": pairs, "val": EVAL_PAIRS, "test": EVAL_PAIRS}
    for split, count in splits.items():
        with open(folder / f"{split}.en", "w") as en, open(folder / f"{split}.de", "w") as de:
            for start in range(0, count, 100_000):
                n = min(100_000, count - start)
                lengths = np.clip(rng.normal(25, 8, n).astype(int), 3, 80)
                ids = rng.choice(vocab, size=int(lengths.sum()), p=weights)
                cuts = np.cumsum(lengths)[:-1]
                for sentence in np.split(ids, cuts):
                    en.write(" ".join(src_words[sentence]) + ".\n")
                    de.write(" ".join(tgt_words[np.roll(sentence, 1)]) + ".\n")


def peak_mb() -> tuple[float, float]:
    """Peak resident memory so far of this process and of its largest finished child (MB)."""
    return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)


def resident() -> dict[str, float]:
    """This process's resident memory now (MB): anonymous (its own data) and file-backed (pages of
    memory-mapped files, such as the Arrow cache, which the kernel drops when memory is short)."""
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return {key: int(status[key].split()[0]) / 1024 for key in ("RssAnon", "RssFile") if key in status}


class AnonPeak(threading.Thread):
    """The highest anonymous resident memory of this process (RssAnon, MB), read every `every` seconds:
    what the process itself holds, without the pages of files it maps."""

    def __init__(self, every: float = 0.25) -> None:
        super().__init__(daemon=True)
        self.every, self.peak, self.running = every, 0.0, True

    def run(self) -> None:
        while self.running:
            self.peak = max(self.peak, resident().get("RssAnon", 0.0))
            time.sleep(self.every)


def copy_corpus(corpus_dir: str, folder: Path, first: int, last: int) -> None:
    """Training lines first..last-1 of the corpus in `corpus_dir`, and all of val and test, into `folder`."""
    folder.mkdir()
    for split in ("train", "val", "test"):
        for lang in ("en", "de"):
            with open(f"{corpus_dir}/{split}.{lang}") as src, open(folder / f"{split}.{lang}", "w") as dst:
                for i, line in enumerate(src):
                    if split == "train" and i == last:
                        break
                    if split != "train" or i >= first:
                        dst.write(line)


def prepare(corpus_dir: str, pairs: int, num_proc: int, train_sample: int | None = None, corpora: int = 1) -> dict:
    """In this process: prepare the first `pairs` training pairs as a run does, as one corpus or as
    `corpora` corpora of equal size (data.corpora, the second tagged); phase times
    and memory."""
    from transformer_mt.data.corpus import TextFileCorpus
    from transformer_mt.data.datamodule import TranslationDataModule
    from transformer_mt.data.tokenizer import TokenizerOptions

    marks: dict[str, float] = {}

    class Marks(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            text = record.getMessage()
            if text.startswith("training ") and "vocabular" in text:  # a joint vocabulary, separate vocabularies
                marks["tokenizer"] = time.perf_counter()

    logging.getLogger("transformer_mt").addHandler(Marks())
    logging.getLogger("transformer_mt").setLevel(logging.INFO)
    with tempfile.TemporaryDirectory() as cache:
        folders = [Path(cache) / f"corpus{k}" for k in range(corpora)]
        for k, folder in enumerate(folders):
            copy_corpus(corpus_dir, folder, k * pairs // corpora, (k + 1) * pairs // corpora)
        result = {"pairs": pairs, "text_mb": sum(p.stat().st_size for f in folders for p in f.glob("train.*")) / 2**20}
        extra = {f"c{k}": TextFileCorpus(str(f), "en", "de", tag="bt" if k == 1 else None)
                 for k, f in enumerate(folders[1:], 1)}
        anon = AnonPeak()
        anon.start()
        start = time.perf_counter()
        dm = TranslationDataModule({"c0": TextFileCorpus(str(folders[0]), "en", "de"), **extra}, TokenizerOptions(
                                       vocab_size=37000, **({"train_sample": train_sample} if train_sample else {})),
                                   cache_dir=f"{cache}/cache", max_tokens=25000, max_len=256, num_proc=num_proc)
        dm.vocabularies()  # trained (or found) on the first call
        built = time.perf_counter()
        result["check_s"] = marks["tokenizer"] - start
        result["tokenizer_s"] = built - marks["tokenizer"]
        result["after_tokenizer_mb"], result["tokenizer_anon_mb"] = peak_mb()[0], anon.peak
        dm.prepare_data()
        encoded = time.perf_counter()
        result["encode_s"] = encoded - built
        result["after_encoding_mb"], result["worker_mb"] = peak_mb()
        dm.setup("fit")
        batch = next(iter(dm.train_dataloader()))
        result["first_batch_s"] = time.perf_counter() - encoded
        result.update(resident())
        result["batch_rows"] = int(batch["src"].size(0))
        result["total_s"] = time.perf_counter() - start
        result["peak_mb"] = max(peak_mb())
        anon.running = False
        result["peak_anon_mb"] = anon.peak
    return result


def main() -> None:
    parser = harness.parser(__doc__, with_json=False)
    parser.add_argument("--sizes", type=int, nargs="+", default=[450_000, 1_500_000, 4_500_000])
    parser.add_argument("--num-proc", type=int, default=1)
    parser.add_argument("--train-sample", type=int, help="data.tokenizer.train_sample (default: its default)")
    parser.add_argument("--corpora", type=int, default=1, help="each size as this many corpora of equal size")
    parser.add_argument("--news", action="store_true",
                        help="a type-rich corpus, as news text is (about a million distinct words a side in 1M lines)")
    parser.add_argument("--corpus", help="a folder written by an earlier run of this script (kept)")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(prepare(args.child[0], int(args.child[1]), args.num_proc, args.train_sample,
                                 args.corpora)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(args.corpus or Path(tmp) / "corpus")
        if not (corpus / "train.en").is_file() or sum(1 for _ in open(corpus / "train.en")) < max(args.sizes):
            started = time.perf_counter()
            write_corpus(corpus, max(args.sizes), args.news)
            print(f"wrote {max(args.sizes):,} pairs in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        columns = ["pairs", "text (MB)", "check + sample (s)", "tokenizer (s)", "encode (s)", "first batch (s)",
                   "total (s)", "peak RSS (MB)", "peak RssAnon (MB)"]
        print(harness.described(harness.machine()) + "\n")
        print(markdown_table(columns, [], right=range(9)), flush=True)  # then a row per size as it comes
        for size in args.sizes:
            r = harness.last_json(harness.in_process([
                sys.executable, __file__, "--num-proc", str(args.num_proc), "--corpora", str(args.corpora),
                *(["--train-sample", str(args.train_sample)] if args.train_sample else []),
                "--child", str(corpus), str(size)]))
            cells = [f"{r['pairs']:,}", f"{r['text_mb']:,.0f}", f"{r['check_s']:.0f}", f"{r['tokenizer_s']:.0f}",
                     f"{r['encode_s']:.0f}", f"{r['first_batch_s']:.0f}", f"{r['total_s']:.0f}",
                     f"{r['peak_mb']:,.0f}", f"{r['peak_anon_mb']:,.0f}"]
            print(markdown_table(columns, [cells]).splitlines()[-1], flush=True)


if __name__ == "__main__":
    main()
