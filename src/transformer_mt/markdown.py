"""The one Markdown table writer: report.md's tables and the dashboards' text tables."""


def markdown_table(columns: list[str], rows: list[list]) -> str:
    """A Markdown table of `rows` under the header `columns`; a cell's `|` is escaped and its line
    breaks become spaces, so that any text keeps the table whole."""
    def cell(value) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(c) for c in columns) + " |", "|" + "---|" * len(columns)]
    return "\n".join(lines + ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows])
