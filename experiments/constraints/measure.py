"""Lexically constrained decoding measured as fairseq and sockeye measure it: constraints drawn
from the references, BLEU without and with them, the share of constraints met, and the time
against unconstrained beam search, on the shipped model and Multi30k's test2016.

    python experiments/constraints/measure.py --source test2016.en --reference test2016.de
        [--ckpt experiments/multi30k/multi30k_en_de.ckpt] [--rounds 3] [--seed 1] [--json PATH]

Constraints: for each sentence, 1 (then 2) words of its reference that the unconstrained beam-4
output lacks (words of 4 letters or more, punctuation stripped; drawn with `--seed`); a sentence
with fewer such words gets what it has. Met: the constraint is in the output's text (the search
guarantees its tokens); also counted: as a whole word (a constraint's tokens may go on into a longer
word: "Hund" in "Hunde"). Time: beam 4 without constraints and with 2 a sentence,
alternating in one process (`--rounds` of each); the ratio of their medians (x > 1: constrained is
slower). The CPU is named in the result."""

import argparse
import json
import random
import re
import statistics
import time
from pathlib import Path

from transformer_mt.decoding import BeamSearch, PowerLength, SearchOptions
from transformer_mt.evaluation.metrics import corpus_scores
from transformer_mt.inference.line_translation import translate_lines
from transformer_mt.inference.members import load_translator
from transformer_mt.model.kernels import cpu

HERE = Path(__file__).resolve().parent

WORD = re.compile(r"\w{4,}")


def beam(constraints: bool) -> BeamSearch:
    """decoding=beam's search (beam 4, alpha 0.6, max length src + 50)."""
    return BeamSearch(4, PowerLength(0.6), 1, SearchOptions(max_len_a=1.0, max_len_b=50), constraints=constraints)


def draw(references: list[str], outputs: list[str], n: int, seed: int) -> list[list[str]]:
    """Up to n words of each reference that its output lacks, drawn at random (seeded)."""
    rng = random.Random(seed)
    drawn = []
    for reference, output in zip(references, outputs):
        have = set(WORD.findall(output))
        missing = list(dict.fromkeys(w for w in WORD.findall(reference) if w not in have))
        drawn.append(rng.sample(missing, min(n, len(missing))))
    return drawn


def met(outputs: list[str], constraints: list[list[str]]) -> tuple[int, int, int]:
    """(constraints in the output's text, constraints that are whole words of it, constraints)."""
    pairs = [(w in out, w in WORD.findall(out)) for out, words in zip(outputs, constraints) for w in words]
    return sum(a for a, _ in pairs), sum(b for _, b in pairs), len(pairs)


def texts(translator, sources: list[str], constraints: list[list[str]] | None) -> tuple[list[str], float]:
    start = time.perf_counter()
    nbests = translate_lines(translator, sources, 4096, constraints=constraints)
    return [n[0].text for n in nbests], time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ckpt", default=str(HERE.parent / "multi30k" / "multi30k_en_de.ckpt"))
    parser.add_argument("--source", required=True)
    parser.add_argument("--reference", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    sources = Path(args.source).read_text(encoding="utf-8").splitlines()
    references = Path(args.reference).read_text(encoding="utf-8").splitlines()
    plain = load_translator([Path(args.ckpt)], beam(False))
    constrained = plain.with_search(beam(True))
    baseline, _ = texts(plain, sources, None)
    rows = [{"constraints": 0, "bleu": corpus_scores(baseline, references)["bleu"], "met": None}]
    drawn = {}
    for n in (1, 2):
        drawn[n] = draw(references, baseline, n, args.seed)
        outputs, _ = texts(constrained, sources, drawn[n])
        hit, words, total = met(outputs, drawn[n])
        rows.append({"constraints": n, "given": total, "bleu": corpus_scores(outputs, references)["bleu"],
                     "met": hit / max(total, 1), "whole_words": words / max(total, 1),
                     "unmet_lines": constrained.search.unmet})
    times = {"beam 4": [], "beam 4, 2 constraints": []}
    for _ in range(args.rounds):
        times["beam 4"].append(texts(plain, sources, None)[1])
        times["beam 4, 2 constraints"].append(texts(constrained, sources, drawn[2])[1])
    ratio = statistics.median(times["beam 4, 2 constraints"]) / statistics.median(times["beam 4"])
    result = {"cpu": cpu(), "rows": rows, "seconds": times, "time_ratio": ratio}
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
