"""A distilled corpus against the original one it was translated from (issue 51): lines, words per
line, the length ratio, the vocabulary (distinct words, and those seen once) and how many targets
equal the reference, as a Markdown table. Words are whitespace-separated, as written.

    python experiments/multi30k/distill/corpus_stats.py ORIGINAL_TARGETS DISTILLED_TARGETS
"""

import argparse
from collections import Counter
from pathlib import Path

from transformer_mt.markdown import markdown_table


def stats(lines: list[str]) -> dict[str, float]:
    counts = Counter(word for line in lines for word in line.split())
    words = sum(counts.values())
    return {"lines": len(lines), "words": words, "words a line": words / len(lines), "distinct words": len(counts),
            "words seen once": sum(1 for c in counts.values() if c == 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("original", type=Path)
    parser.add_argument("distilled", type=Path)
    args = parser.parse_args()
    original, distilled = (p.read_text(encoding="utf-8").splitlines() for p in (args.original, args.distilled))
    if len(original) != len(distilled):
        raise SystemExit(f"error: {args.original} has {len(original)} lines, {args.distilled} {len(distilled)}")
    a, b = stats(original), stats(distilled)
    rows = [[key, f"{a[key]:,.2f}", f"{b[key]:,.2f}"] if key == "words a line" else [key, f"{a[key]:,}", f"{b[key]:,}"]
            for key in a]
    same = sum(x.strip() == y.strip() for x, y in zip(original, distilled))
    rows += [["length ratio (distilled / original words)", "", f"{b['words'] / a['words']:.3f}"],
             ["targets equal to the reference", "", f"{same:,} ({100 * same / len(original):.1f}%)"]]
    print(markdown_table(["", "original", "distilled"], rows, right=(1, 2)))


if __name__ == "__main__":
    main()
