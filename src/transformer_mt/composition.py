"""Hydra's composition errors as one line: a key that does not exist names the nearest real one
(`optim.warmup_steps` -> optim.scheduler.warmup_steps), or the option of its group that has it
(`decoding.beam_size` with decoding=greedy -> decoding=beam); a group option that does not exist
lists the group's options. run.py lets Hydra raise them (HYDRA_FULL_ERROR) and prints this line."""

import re
from collections.abc import Sequence
from pathlib import Path

from hydra.errors import ConfigCompositionException, MissingConfigException
from omegaconf import DictConfig, OmegaConf

from transformer_mt.config_keys import leaf_keys, nearest

CONF = Path(__file__).resolve().parents[2] / "conf"
NOT_OVERRIDABLE = re.compile(r"Could not override '([^']+)'")
ALREADY_THERE = re.compile(r"Could not append to config\. An item is already at '([^']+)'")


def composed(overrides: Sequence[str]) -> DictConfig | None:
    """The config the `overrides` compose (the bare default config if they fail too), Hydra's own
    keys (its choices: hydra.runtime.choices) included; None if neither composes."""
    for attempt in (list(overrides), []):
        cfg = composed_exactly(attempt)
        if cfg is not None:
            return cfg
    return None


def composed_exactly(overrides: Sequence[str]) -> DictConfig | None:
    """The config the `overrides` compose, or None if they do not."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()  # what hydra.main left
    try:
        with initialize_config_dir(version_base="1.3", config_dir=str(CONF), job_name="keys"):
            return compose(config_name="config", overrides=list(overrides), return_hydra_config=True)
    except ConfigCompositionException:
        return None


def known_keys(cfg: DictConfig | None) -> list[str]:
    """Every key of the composed config `cfg`, Hydra's own left out."""
    return [k for k in leaf_keys(cfg) if k != "hydra" and not k.startswith("hydra.")] if cfg is not None else []


def option_keys(group: str, option: str) -> list[str]:
    """Every key of option `option` of config group `group` (conf/GROUP/OPTION.yaml, and the schema's
    node it extends: the group composed with that option)."""
    cfg = composed_exactly([f"{group}={option}"])
    node = OmegaConf.select(cfg, group.replace("/", ".")) if cfg is not None else None
    return leaf_keys(node) if isinstance(node, DictConfig) else []


def other_option(key: str, cfg: DictConfig | None) -> str | None:
    """'KEY is a key of GROUP=OPTION, not of GROUP=CHOSEN: add GROUP=OPTION' when `key` is missing only
    because another option of its group (`decoding.beam_size`: decoding=beam) is not the one chosen."""
    choices = cfg.hydra.runtime.choices if cfg is not None else {}
    for choice, chosen in choices.items():
        group, _, package = choice.partition("@")
        package = package or group.replace("/", ".")
        if group.startswith("hydra") or not key.startswith(package + ".") or not (CONF / group).is_dir():
            continue
        rest = key[len(package) + 1:]
        having = [f"{choice}={p.stem}" for p in sorted((CONF / group).glob("*.yaml"))
                  if p.stem != chosen and rest in option_keys(group, p.stem)]
        if having:
            now = f"not of {choice}={chosen}" if chosen else f"and {choice} is not chosen"
            return f"{key} is a key of {' and '.join(having)}, {now}: add {' or '.join(having)}"
    return None


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
        cfg = composed(others)
        return other_option(key, cfg) or f"{key}: no such key{nearest(key, known_keys(cfg))}"
    there = ALREADY_THERE.search(str(err))
    if there:
        return f"+{there[1]}: the key exists; set it without the + ({there[1]}=VALUE)"
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]  # where, then what (a preset's key)
    cause = str(err.__cause__).strip().splitlines()[0] if err.__cause__ and len(lines) == 1 else ""
    return " ".join([*lines[:2], cause]).strip()
