"""What the suite's measured bounds measured: each recorded value under several numeric profiles.

    python experiments/portability/margins.py LABEL=REPORT.xml [LABEL=REPORT.xml ...]

REPORT.xml: pytest's --junitxml report of a run of the suite (experiments/portability/run.sh writes
one per profile). The tests whose bounds are spreads measured across profiles record the value
they bound (pytest's `record_property`); this prints a markdown table, a row per test and value, a
column per report (a dash where a report lacks it: the test was skipped or stopped before), then
the tests each report failed. A file that is missing or no junit XML stops it in one line.
"""

import argparse
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from transformer_mt.markdown import markdown_table


def read_report(path: Path) -> tuple[dict[tuple[str, str], str], list[str]]:
    """The recorded values of a junit XML report, by (test, name), and the tests it failed."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as err:
        sys.exit(f"error: {path}: {err}")
    values, failed = {}, []
    for case in root.iter("testcase"):
        test = f"{case.get('classname', '').rpartition('.')[2]}::{case.get('name')}"
        for prop in case.iter("property"):
            values[test, prop.get("name")] = prop.get("value")
        if case.find("failure") is not None or case.find("error") is not None:
            failed.append(test)
    return values, failed


def cell(value: str | None) -> str:
    """A value as the table shows it: 4 significant digits, or a dash."""
    if value is None:
        return "-"
    try:
        return f"{float(value):.4g}"
    except ValueError:
        return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", metavar="LABEL=REPORT.xml")
    labels, reports = [], []
    for each in parser.parse_args().reports:
        label, _, path = each.partition("=")
        if not path:
            sys.exit(f"error: {each}: give LABEL=REPORT.xml")
        labels.append(label)
        reports.append(read_report(Path(path)))
    keys = sorted({key for values, _ in reports for key in values})
    rows = [[f"`{test}`", name, *(cell(values.get((test, name))) for values, _ in reports)] for test, name in keys]
    print(markdown_table(["test", "value", *labels], rows, right=range(2, 2 + len(labels))))
    for label, (_, failed) in zip(labels, reports):
        print(f"\n{label}: " + (f"{len(failed)} failed: " + ", ".join(failed) if failed else "no test failed"))


if __name__ == "__main__":
    main()
