"""Two systems' test translations against each other with sacreBLEU's paired tests (issue 38: the
ensemble against the published single model).

    python experiments/multi30k/paired.py BASE_RUN SYSTEM_RUN [--metric bleu chrf ter bleu_tok_lc]
        [--base-set NAME] [--system-set NAME]

BASE_RUN and SYSTEM_RUN are run folders of `task=evaluate` (or of a training run): their
metrics.json names the test translations and references, which must be the same references (a
run's first test set, or its named set NAME: a run of several corpora, issue 49). Prints
per metric (default: all four; bleu_tok_lc is BLEU on 13a-tokenized lowercased text, the score the
older papers give) both scores, the difference with its 95% confidence interval, and the p-values
of the paired bootstrap (1,000 resamples) and of approximate randomization (10,000 trials), as
task=report computes them (transformer_mt/evaluation/significance.py).
"""

import argparse
import sys
from pathlib import Path

from transformer_mt.evaluation.significance import METRICS, paired_test
from transformer_mt.markdown import markdown_table
from transformer_mt.tasks.runs.outputs import read_test_set


def outputs(run: Path, name: str | None = None) -> tuple[list[str], list[str]]:
    """A run's test translations and references: its first set's, or those of its set `name`."""
    try:
        return read_test_set(run, name)
    except ValueError as error:
        sys.exit(f"error: {error}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("base", type=Path)
    parser.add_argument("system", type=Path)
    parser.add_argument("--metric", nargs="+", default=list(METRICS), choices=list(METRICS))
    parser.add_argument("--base-set", help="the base run's named test set (default: its first)")
    parser.add_argument("--system-set", help="the system run's named test set (default: its first)")
    args = parser.parse_args()
    (base, refs), (system, other_refs) = outputs(args.base, args.base_set), outputs(args.system, args.system_set)
    if refs != other_refs:
        sys.exit(f"error: {args.base} and {args.system} were scored on different references")
    rows = []
    for metric in args.metric:
        r = paired_test(base, system, refs, metric=metric)
        rows.append([metric, f"{r.baseline:.2f}", f"{r.system:.2f}",
                     f"{r.delta:+.2f} [{r.ci_low:+.2f}, {r.ci_high:+.2f}]", f"{r.p_bootstrap:.4f}",
                     f"{r.p_randomization:.4f}", "yes" if r.significant else "no"])
    columns = ["metric", "base", "system", "difference (95% CI)", "p bootstrap", "p AR", "both p < 0.05"]
    print(markdown_table(columns, rows, right=(1, 2, 3, 4, 5)))


if __name__ == "__main__":
    main()
