"""docs/configuration.md's "Every key" section, written from the schema: for the top level, each
group declared in the schema and each task, every key with its default, what it must be and its description. `python -m
transformer_mt.schema.reference` prints it, `make config-docs` writes it into the page; tests check
that the page holds exactly this."""

import json
import sys
from dataclasses import is_dataclass
from pathlib import Path

from transformer_mt.markdown import markdown_table
from transformer_mt.schema.keys import MISSING, described, field_default
from transformer_mt.schema.store import TASKS
from transformer_mt.schema.top import RunConfig

START = "<!-- every key: written by `python -m transformer_mt.schema.reference` from src/transformer_mt/schema -->"
END = "<!-- end of every key -->"


def default_text(value: object) -> str:
    """A default as the command line writes it."""
    if is_dataclass(value):
        return "(a group: its keys below)"
    if value == MISSING:
        return "(required)"
    if value is None or isinstance(value, bool):
        return f"`{json.dumps(value)}`"
    if isinstance(value, dict | list):
        return "`" + json.dumps(value).replace('"', "") + "`"
    return f"`{value}`"


def key_table(kind: type, prefix: str) -> str:
    """The Markdown table of schema class `kind`'s keys, named `prefix` + key."""
    rows = []
    for each in described(kind):
        default = field_default(each)
        must = each.metadata["must"]
        rule = (must[1] + (" or null" if each.metadata["nullable"] and "null" not in must[1] else "")) if must else ""
        rows.append([f"`{prefix}{each.name}`", default_text(default), rule, each.metadata["help"]])
    return markdown_table(["key", "default", "must be", "description"], rows)


def reference() -> str:
    """The section's text, between its START and END marks."""
    parts = [START, "", "### Top level", "", key_table(RunConfig, "")]
    for each in described(RunConfig):  # the groups declared in the schema
        if is_dataclass(group := field_default(each)):
            usage = " ".join(line.strip() for line in (type(group).__doc__ or "").splitlines())
            parts += ["", f"### {each.name}", "", usage, "", key_table(type(group), f"{each.name}.")]
    for name, kind in TASKS.items():
        usage = " ".join(line.strip() for line in (kind.__doc__ or "").splitlines())
        parts += ["", f"### task={name}", "", usage, "", key_table(kind, "task.")]
    return "\n".join([*parts, "", END])


def write_into(page: Path) -> None:
    """Replace the section between START and END of `page` with `reference()`."""
    text = page.read_text(encoding="utf-8")
    start, end = text.index(START), text.index(END) + len(END)
    page.write_text(text[:start] + reference() + text[end:], encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--write"]:
        write_into(Path(sys.argv[2]))
    else:
        print(reference())
