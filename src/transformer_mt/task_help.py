"""`python run.py task=NAME --help`: that task's command and keys, each with its default and
description, read from the schema (src/transformer_mt/schema) before Hydra or torch is imported."""

import textwrap

from transformer_mt.schema.keys import described, field_default
from transformer_mt.schema.store import TASKS


def asked_task(argv: list[str]) -> str | None:
    """The task NAME of `task=NAME` when `--help` is also in argv (None otherwise)."""
    if "--help" not in argv and "-h" not in argv:
        return None
    names = [a.split("=", 1)[1] for a in argv if a.startswith("task=")]
    return names[-1] if names else None


def command_line_default(each) -> str:
    """A schema field's default as the command line would write it."""
    value = field_default(each)
    return {None: "null", True: "true", False: "false", "???": "??? (must be given)"}.get(value, value) \
        if isinstance(value, bool | None | str) else str(value)


def task_help(name: str) -> str:
    """The help text of task=`name` (or the list of tasks for a name that is none)."""
    kind = TASKS.get(name)
    if kind is None:
        return f"task={name}: no such task; the tasks: {', '.join(TASKS)}"
    usage = " ".join(kind.__doc__.split())
    lines = [textwrap.fill(usage, 100, subsequent_indent="    "), "", f"== task={name}'s keys (task.KEY=VALUE) =="]
    for each in described(kind):
        if each.name in ("run", "name"):
            continue
        lines.append(f"task.{each.name} = {command_line_default(each)}")
        lines += textwrap.wrap(each.metadata["help"], 96, initial_indent="    ", subsequent_indent="    ")
    lines += ["", "Every group and key: python run.py --help, and docs/configuration.md (Every key)."]
    return "\n".join(lines)
