"""docs/configuration.md's "Every key" section, written from the schema: for the top level, each
group, each option of the decoding and optim groups, each logger, our callbacks with settings and
each task, every key with its default, what it must be and its description. `python -m
transformer_mt.tasks.options.reference` prints it, `make config-docs` writes it into the page; tests
check that the page holds exactly this."""

import json
import sys
from dataclasses import is_dataclass
from pathlib import Path

from transformer_mt.markdown import markdown_table
from transformer_mt.schema.callback_keys import CALLBACKS
from transformer_mt.schema.data_keys import CheckpointDataNode, DataNode
from transformer_mt.schema.keys import MISSING, described, field_default, flat_keys, rule_words
from transformer_mt.schema.logger_keys import LOGGERS
from transformer_mt.schema.optim import OPTIMS
from transformer_mt.schema.search_keys import SEARCHES
from transformer_mt.schema.top import RunConfig
from transformer_mt.tasks.options import TASKS

START = "<!-- every key: written by `python -m transformer_mt.tasks.options.reference` -->"
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


def key_rows(kind: type, prefix: str, nested: bool = False) -> list[list[str]]:
    """The rows of schema class `kind`'s keys, named `prefix` + key; `nested`: a key that is a node of
    its own (decoding.options) gives its keys' rows instead of one (keys.flat_keys)."""
    return [[f"`{name}`", default_text(default), rule_words(each) if each.metadata["must"] else "",
             each.metadata["help"]] for name, each, default in flat_keys(kind, prefix, nested=nested)]


def section(title: str, kind: type, prefix: str, nested: bool = False) -> list[str]:
    """A section: its title, `kind`'s docstring as one paragraph, the table of its keys."""
    usage = " ".join(line.strip() for line in (kind.__doc__ or "").splitlines())
    rows = key_rows(kind, prefix, nested=nested)
    return ["", f"### {title}", "", usage, "", markdown_table(["key", "default", "must be", "description"], rows)]


def reference() -> str:
    """The section's text, between its START and END marks."""
    table = markdown_table(["key", "default", "must be", "description"], key_rows(RunConfig, ""))
    parts = [START, "", "### Top level", "", table]
    for each in described(RunConfig):  # the groups declared in the schema
        if is_dataclass(group := field_default(each)):
            parts += section(each.name, type(group), f"{each.name}.")
    parts += section("data (every preset: data=toy, multi30k, files, ...)", DataNode, "data.", nested=True)
    parts += section("data=checkpoint", CheckpointDataNode, "data.")
    for group, options in (("decoding", SEARCHES), ("optim", OPTIMS)):  # a node per option
        for name, kind in options.items():
            parts += section(f"{group}={name}", kind, f"{group}.", nested=True)
    for name, kind in CALLBACKS.items():  # our callbacks with settings, wherever a callbacks option has them
        parts += section(f"callbacks.{name}", kind, f"callbacks.{name}.")
    for name, kind in LOGGERS.items():
        parts += section(f"logger={name}", kind, f"logger.{name}.")
    for name, kind in TASKS.items():
        parts += section(f"task={name}", kind, "task.")
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
