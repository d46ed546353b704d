"""Run folders' scores as one markdown table (issue 51: the choices made on val, then the test).

    python experiments/multi30k/scores.py LABEL=RUN [LABEL=RUN ...]

RUN is a run folder of `task=evaluate` (its split: `data.split`) or of a training run (its test):
a row per run with the label, the split, BLEU on 13a-tokenized lowercased text (`task.tokenized_bleu`;
a dash without it), sacreBLEU cased BLEU, chrF and TER. A folder without metrics.json stops the
script in one line naming it.
"""

import argparse
import json
import sys
from pathlib import Path

from transformer_mt.markdown import markdown_table

COLUMNS = ("bleu_tok_lc", "bleu", "chrf", "ter")


def row(label: str, run: Path) -> list[str]:
    """One table row: the label, the split and its four scores (a dash for one the run lacks)."""
    try:
        metrics = json.loads((run / "metrics.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        sys.exit(f"error: {run}/metrics.json: no such file (an unfinished run?)")
    split = metrics.get("split", "test")
    cells = [f"{metrics[f'{split}/{c}']:.2f}" if f"{split}/{c}" in metrics else "-" for c in COLUMNS]
    return [label, split, *cells]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", metavar="LABEL=RUN")
    args = parser.parse_args()
    rows = []
    for each in args.runs:
        label, _, run = each.partition("=")
        if not run:
            sys.exit(f"error: {each}: give LABEL=RUN, RUN a run folder")
        rows.append(row(label, Path(run)))
    columns = ["system", "split", "BLEU, 13a-tokenized lowercased", "sacreBLEU cased", "chrF", "TER"]
    print(markdown_table(columns, rows, right=(2, 3, 4, 5)))


if __name__ == "__main__":
    main()
