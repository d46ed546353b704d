"""`python run.py task=NAME --help` (or decoding=NAME, optim=NAME): that option's command or use and
keys, each with its default and description, read from the schema (src/transformer_mt/schema)
before Hydra or torch is imported."""

import textwrap

from transformer_mt.schema.keys import flat_keys
from transformer_mt.schema.optim import OPTIMS
from transformer_mt.schema.search_keys import SEARCHES
from transformer_mt.tasks.options import TASKS

OPTIONS = {"task": TASKS, "decoding": SEARCHES, "optim": OPTIMS}  # the groups whose options have nodes of their own


def asked_options(argv: list[str]) -> list[tuple[str, str]]:
    """The (group, NAME) of each `task=NAME`, `decoding=NAME` or `optim=NAME` when `--help` is also in
    argv (none otherwise)."""
    if "--help" not in argv and "-h" not in argv:
        return []
    given = [a.split("=", 1) for a in argv if "=" in a]
    return [(group, name) for group, name in given if group in OPTIONS]


def command_line_default(value: object) -> str:
    """A default as the command line would write it."""
    return {None: "null", True: "true", False: "false", "???": "??? (must be given)"}.get(value, value) \
        if isinstance(value, bool | None | str) else str(value)


def key_lines(kind: type, prefix: str) -> list[str]:
    """`prefix`KEY = DEFAULT and its description, for each key of schema class `kind` (a key that is a
    node of its own gives its keys'), the task's name aside."""
    lines = []
    for name, each, default in flat_keys(kind, prefix):
        if each.name != "name":
            lines.append(f"{name} = {command_line_default(default)}")
            lines += textwrap.wrap(each.metadata["help"], 96, initial_indent="    ", subsequent_indent="    ")
    return lines


def task_help(name: str, group: str = "task") -> str:
    """The help text of `group`=`name` (or the list of the group's options for a name that is none)."""
    kind = OPTIONS[group].get(name)
    if kind is None:
        kind_of = "task" if group == "task" else f"option of {group}"
        return f"{group}={name}: no such {kind_of}; the {'tasks' if group == 'task' else 'options'}: " \
               f"{', '.join(OPTIONS[group])}"
    usage = " ".join(kind.__doc__.split())
    lines = [textwrap.fill(usage, 100, subsequent_indent="    "), "",
             f"== {group}={name}'s keys ({group}.KEY=VALUE) ==", *key_lines(kind, f"{group}.")]
    lines += ["", "Every group and key: python run.py --help, and docs/configuration.md (Every key)."]
    return "\n".join(lines)
