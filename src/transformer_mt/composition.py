"""Hydra's composition errors as one line: a key that does not exist names the nearest real one
(`optim.warmup_steps` -> optim.scheduler.warmup_steps), a group option that does not exist lists
the group's options. run.py lets Hydra raise them (HYDRA_FULL_ERROR) and prints this line."""

import re
from collections.abc import Sequence
from pathlib import Path

from hydra.errors import ConfigCompositionException, MissingConfigException

from transformer_mt.config_keys import leaf_keys, nearest

CONF = Path(__file__).resolve().parents[2] / "conf"
NOT_OVERRIDABLE = re.compile(r"Could not override '([^']+)'")
ALREADY_THERE = re.compile(r"Could not append to config\. An item is already at '([^']+)'")


def known_keys(overrides: Sequence[str]) -> list[str]:
    """Every key of the config the other overrides compose (the bare default config if they fail too)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    for attempt in (list(overrides), []):
        GlobalHydra.instance().clear()  # what hydra.main left
        try:
            with initialize_config_dir(version_base="1.3", config_dir=str(CONF), job_name="keys"):
                return leaf_keys(compose(config_name="config", overrides=attempt))
        except ConfigCompositionException:
            continue
    return []


def composition_error(err: ConfigCompositionException, overrides: Sequence[str]) -> str:
    """The one line for a composition error of the command line's `overrides`."""
    if isinstance(err, MissingConfigException) and err.options:
        group = (err.missing_cfg_file or "").rsplit("/", 1)[0]
        given = next((o.split("=", 1)[1] for o in overrides if o.lstrip("+~").split("=", 1)[0] == group), None)
        option = f"{group}={given}" if given else str(err.missing_cfg_file)
        return f"{option}: no such option of {group}; its options: {', '.join(sorted(err.options))}"
    found = NOT_OVERRIDABLE.search(str(err))
    if found:
        key = found[1]
        others = [o for o in overrides if o.lstrip("+~").split("=", 1)[0] != key and not o.startswith("-")]
        return f"{key}: no such key{nearest(key, known_keys(others))}"
    there = ALREADY_THERE.search(str(err))
    if there:
        return f"+{there[1]}: the key exists; set it without the + ({there[1]}=VALUE)"
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]  # where, then what (a preset's key)
    cause = str(err.__cause__).strip().splitlines()[0] if err.__cause__ and len(lines) == 1 else ""
    return " ".join([*lines[:2], cause]).strip()
