"""Keys that do not exist: a key added with `+` where nothing reads it (and, in errors.py, a
constructor argument Hydra was given that the class does not take). Each is one line naming the full key and the nearest
real one, never Hydra's multi-line error or a silently ignored setting."""

import difflib
from collections.abc import Iterable

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigTypeError

from transformer_mt.errors import ConfigError

# nodes whose keys are names the user chooses: a callback, a corpus, a logger (each a node of its own)
OPEN = ("callbacks", "data.corpora", "logger", "hydra")


def nearest(key: str, keys: Iterable[str]) -> str:
    """' (did you mean K?)' for the real key K nearest `key`: one ending in the same name first."""
    keys = [k for k in keys if k != key]
    name = key.rsplit(".", 1)[-1]
    same_name = [k for k in keys if k.rsplit(".", 1)[-1] == name]
    found = difflib.get_close_matches(key, same_name, n=1, cutoff=0) if same_name else \
        difflib.get_close_matches(key, keys, n=1, cutoff=0.8)
    return f" (did you mean {found[0]}?)" if found else ""


def leaf_keys(node, prefix: str = "") -> list[str]:
    """Every dotted key of a config, nodes and values (interpolations unresolved)."""
    keys = []
    try:
        items = list(node.items_ex(resolve=False)) if isinstance(node, DictConfig) else []
    except ConfigTypeError:  # a node that is null (an optional one of the schema)
        items = []
    for key, value in items:
        full = f"{prefix}{key}"
        keys.append(full)
        if isinstance(value, DictConfig):
            keys += leaf_keys(value, full + ".")
    return keys


def added_key(override: str) -> str | None:
    """The key a `+key=value` or `++key=value` override adds (None for any other override)."""
    if not override.startswith("+") or "=" not in override:
        return None
    return override.lstrip("+").split("=", 1)[0].split("@", 1)[0]


def refuse_stray_additions(cfg: DictConfig, overrides: Iterable[str], groups: Iterable[str]) -> None:
    """A ConfigError for the first `+key=value` that adds a key nothing reads: its node is neither a
    constructor call (whose class refuses an argument it does not take) nor one of the OPEN nodes.
    `groups`: the config groups, whose `+group=option` adds a choice, not a key."""
    groups = set(groups)
    for override in overrides:
        key = added_key(override)
        if key is None or key in groups or any(key == o or key.startswith(o + ".") for o in OPEN):
            continue
        parent, _, name = key.rpartition(".")
        node = OmegaConf.select(cfg, parent, default=None) if parent else cfg
        if isinstance(node, DictConfig) and "_target_" in node:
            continue
        where = parent or "the top level"
        raise ConfigError(f"+{key}: {where} has no key {name} and nothing would read it"
                          f"{nearest(key, leaf_keys(cfg))}")
