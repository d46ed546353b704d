"""transformer_mt.markdown.markdown_table is the project's one Markdown table writer: its text for a
small table, and no other source file under src/ or experiments/ writing a table rule by hand."""

import io
import re
import tokenize

from tests.helpers import ROOT
from transformer_mt.markdown import markdown_table

WRITER = ROOT / "src" / "transformer_mt" / "markdown.py"
# a Markdown table rule, or a piece of one: "| ---", "|---", "---:", "--- |", "---|", or a cell of dashes alone
RULE = re.compile(r"\|\s*:?-{3,}|-{3,}:|-{3,}\s*\||^\s*:?-{3,}:?\s*$")
STRINGS = {tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}


def hand_written_rules(source: str) -> list[str]:
    """The string literals (f-strings and docstrings too) of Python `source` that hold a table rule."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return [t.string for t in tokens if t.type in STRINGS and RULE.search(t.string)]


def test_markdown_table_right_aligns_the_named_columns_and_escapes_a_bar():
    text = markdown_table(["system", "seconds", "note"], [["ours", "1.25", "a | b"], ["peer", 10, ""]], right=(1,))
    assert text == ("| system | seconds | note |\n"
                    "|---|---:|---|\n"
                    "| ours | 1.25 | a \\| b |\n"
                    "| peer | 10 |  |")


def test_no_script_writes_a_markdown_table_by_hand():
    # the styles the scripts used before markdown_table wrote their tables
    for old in ('print("| --- | ---: | ---: |")', 'f"|{\' --- |\' * len(columns)}"', '"| --- |" + " ---: |" * n',
                '" | ".join("---:" for _ in labels)', '"|" + "---|" * len(columns)', 'x = "a\\n| --- | ---: |"'):
        assert hand_written_rules(old), old
    files = sorted([*(ROOT / "experiments").rglob("*.py"), *(ROOT / "src").rglob("*.py")])
    found = {str(f.relative_to(ROOT)): rules for f in files if f != WRITER
             if (rules := hand_written_rules(f.read_text(encoding="utf-8")))}
    assert not found, f"tables written by hand (use transformer_mt.markdown.markdown_table): {found}"
