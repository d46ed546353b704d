"""The learning curves of several training runs in one figure (issue 51: the students against the
teacher's members): train loss, val loss and val BLEU against the step, as each run's
plots/curves.csv recorded them (a pipeline's student: its student/ folder).

    python experiments/multi30k/distill/curves.py OUT.png LABEL=RUN [LABEL=RUN ...]
"""

import argparse
import sys
from pathlib import Path

from transformer_mt import plots
from transformer_mt.training.curves import read_curves


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("runs", nargs="+", metavar="LABEL=RUN")
    args = parser.parse_args()
    runs = {}
    for each in args.runs:
        label, _, folder = each.partition("=")
        curves = Path(folder) / "plots" / "curves.csv"
        if not folder or not curves.is_file():
            sys.exit(f"error: {each}: no {curves} (give LABEL=RUN, RUN a training run's folder)")
        runs[label] = read_curves(curves)
    plots.save(plots.curves_figure(runs, args.out.stem), args.out)


if __name__ == "__main__":
    main()
