"""How the schema declares a key, and the one walk that checks a composed config against it.

Each key is a dataclass field made by `key`: its default, a one-line description and what it must be
(a predicate of transformer_mt.validate and its words). The fields are typed `Any` for OmegaConf on
purpose: Hydra then composes the key set (an unknown key is refused at composition) and the defaults,
while `check_keys` tests every value right after composition, before any work, with the one-line
message `KEY=VALUE: must be WHAT` (OmegaConf's own type errors span several lines and name no rule)."""

import copy
from collections.abc import Callable, Iterator
from dataclasses import MISSING as NO_DEFAULT
from dataclasses import Field, field, fields, is_dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf

from transformer_mt.validate import Refusal, refuse, value_refusal

Rule = tuple[Callable[[object], bool], str]
MISSING = "???"  # a key the user must give (OmegaConf's mark)


def key(default: Any, help: str, must: Rule | None = None, nullable: bool = False) -> Any:
    """A config key with its default, its description and what it must be (null too if `nullable`).
    A default that is a schema node (a dataclass instance: a group's) makes the key that node."""
    metadata = {"help": help, "must": must, "nullable": nullable}
    if isinstance(default, list | dict) or is_dataclass(default):
        return field(default_factory=lambda: copy.deepcopy(default), metadata=metadata)
    return field(default=default, metadata=metadata)


class Group:
    """A schema node with rules between its keys too: `refusal` is asked once each key passed its own."""

    @staticmethod
    def refusal(node: DictConfig, prefix: str) -> Refusal:
        """What the keys of `node` (whose keys read `prefix`KEY) cannot be together: its one line, or None."""
        return None


def described(kind: type) -> list:
    """The fields of schema class `kind` that are config keys (those made by `key`)."""
    return [f for f in fields(kind) if "help" in f.metadata]


def field_default(each: Field) -> Any:
    """A schema field's default value (MISSING where the user must give it)."""
    if each.default is not NO_DEFAULT:
        return each.default
    return each.default_factory() if each.default_factory is not NO_DEFAULT else MISSING


def flat_keys(kind: type, prefix: str, node: object = None, nested: bool = True) -> Iterator[tuple[str, Field, Any]]:
    """(`prefix`KEY, its field, its default) for each key of schema class `kind`, the defaults those of
    `node` (an instance: a group's option) where given, else the class's; with `nested`, a key that is
    a node of its own (decoding.options) gives its keys instead (`prefix`options.KEY)."""
    for each in described(kind):
        default = field_default(each) if node is None else getattr(node, each.name)
        if nested and is_dataclass(default):
            yield from flat_keys(type(default), f"{prefix}{each.name}.", default, nested)
        else:
            yield f"{prefix}{each.name}", each, default


def rule_words(each: Field) -> str:
    """What a key must be, in words (`an integer >= 1`, `... or null` where null is allowed too)."""
    words = each.metadata["must"][1]
    return words + (" or null" if each.metadata["nullable"] and "null" not in words else "")


def check_keys(node: DictConfig, prefix: str = "") -> None:
    """Check every schema key of `node` and of the schema nodes under it, also inside a plain mapping
    (the callbacks by name; a ConfigError naming the first bad one); values the user must still give
    (`???`) are left to refuse_missing_values."""
    kind = OmegaConf.get_type(node)
    if not (isinstance(kind, type) and is_dataclass(kind)):
        for name in node:  # a mapping of nodes (callbacks.NAME): those declared in the schema are checked
            if not OmegaConf.is_interpolation(node, name) and isinstance(node[name], DictConfig):
                check_keys(node[name], f"{prefix}{name}.")
        return
    for each in described(kind):
        rule = each.metadata["must"]
        if OmegaConf.is_missing(node, each.name) or (rule is None and OmegaConf.is_interpolation(node, each.name)):
            continue  # (an interpolation without a rule of its own is not resolved here: `${hydra:...}`)
        value = node[each.name]
        if rule is not None:
            refuse(value_refusal(prefix + each.name, value, rule[0], rule_words(each), each.metadata["nullable"]))
        if isinstance(value, DictConfig) and not OmegaConf.is_interpolation(node, each.name):  # `${decoding}`: its own
            check_keys(value, f"{prefix}{each.name}.")
    if issubclass(kind, Group) and not any(OmegaConf.is_missing(node, each.name) for each in described(kind)):
        refuse(kind.refusal(node, prefix))
