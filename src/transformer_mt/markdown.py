"""The one Markdown table writer: report.md's tables, the dashboards' text tables, docs/configuration.md's
key tables and every experiments/ script's table."""

from collections.abc import Sequence


def markdown_table(columns: Sequence[str], rows: Sequence[Sequence], right: Sequence[int] = ()) -> str:
    """A Markdown table of `rows` under the header `columns`, the columns numbered in `right`
    right-aligned (numbers); a cell's `|` is escaped and its line breaks become spaces, so that any
    text keeps the table whole."""
    def cell(value) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")

    rule = "|" + "".join("---:|" if i in right else "---|" for i in range(len(columns)))
    lines = ["| " + " | ".join(cell(c) for c in columns) + " |", rule]
    return "\n".join(lines + ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows])
