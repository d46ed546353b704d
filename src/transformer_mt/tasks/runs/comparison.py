"""A sweep's rows compared with its base row, as task=report and task=lengths show them: which row
is the base, a figure as mean ± std over the seeds, whether a row differs from the base (the rule:
both paired tests p < 0.05 for every seed pair, the differences of one sign), and their tables as
Markdown and CSV."""

import csv
import statistics
from pathlib import Path

from transformer_mt.atomic import atomic_file
from transformer_mt.evaluation.significance import LEVEL, LOWER_IS_BETTER, METRICS, PairedResult
from transformer_mt.markdown import markdown_table
from transformer_mt.tasks.runs.sweep import Job, Row, Sweep
from transformer_mt.validate import check, integer


def group_rows(sweep: Sweep, base_row: int | None = None) -> list[Row]:
    """The sweep's rows; the base row is number `base_row`, else the one whose settings equal the
    sweep's own."""
    rows = sweep.rows()
    check("task.base_row", base_row, integer(0, len(rows) - 1), f"a row number of this sweep, 0 to {len(rows) - 1}",
          nullable=True)
    for index, row in enumerate(rows):
        row.is_base = index == base_row if base_row is not None else (
            bool(sweep.own) and all(row.settings[k] == sweep.own.get(k) for k in sweep.varied))
    return rows


def spread(values: list[float]) -> str:
    """"mean +- std" over seeds (the sample standard deviation; one value: the value)."""
    if not values:
        return ""
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f}"


def verdict(row: Row, tests: list[tuple[Job, PairedResult]] | None) -> tuple[str, str]:
    """(mark, sentence): whether the row differs from the base, by the rule in the docstring
    (tests None: the sweep has no base row)."""
    if row.is_base:
        return "base", "the base row"
    if tests is None:
        return "", "not tested (no base row)"
    if not tests:
        return "", "no seed finished in both this row and the base row: not tested"
    metric = tests[0][1].metric
    label = f"test {METRICS[metric][0]}{' (lower is better)' if metric in LOWER_IS_BETTER else ''}"
    deltas = [result.delta for _, result in tests]
    mean = statistics.mean(deltas)
    every = "the seed pair" if len(tests) == 1 else f"all {len(tests)} seed pairs"
    if all(result.identical for _, result in tests):
        return "-", (f"identical to the base: {mean:+.2f} test {METRICS[metric][0]}, every sentence scored alike "
                     f"for {every}; nothing to test")
    if all(result.significant for _, result in tests) and (min(deltas) > 0 or max(deltas) < 0):
        side = "better" if tests[0][1].gain > 0 else "worse"
        return f"{side} *", (f"{side} than the base: {mean:+.2f} {label}, p < {LEVEL} in both tests for {every}")
    return "-", (f"not shown to differ from the base: {mean:+.2f} {label}; the rule (p < {LEVEL} in both tests, "
                 f"the same sign, for {every}) does not hold")


def table_lines(table: list[dict[str, str]]) -> list[str]:
    """A table of the report (a dict per line) as the lines of a Markdown table."""
    header = list(table[0])
    return markdown_table(header, [[line[h] for h in header] for line in table]).split("\n")


def write_csv(path: Path, table: list[dict[str, str]]) -> None:
    with atomic_file(path) as tmp, open(tmp, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(table[0]) if table else ["row"])
        writer.writeheader()
        writer.writerows(table)
