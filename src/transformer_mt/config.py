"""Config helpers every layer may import (they need only OmegaConf and Hydra)."""

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, ListConfig, OmegaConf


def plain(value):
    """DictConfig / ListConfig -> dict / list (resolved); anything else unchanged."""
    return OmegaConf.to_container(value, resolve=True) if isinstance(value, DictConfig | ListConfig) else value


def overridden_keys() -> set[str]:
    """The keys set on the command line (`data=multi30k` -> data, `+a.b=1` -> a.b); empty outside Hydra."""
    if not HydraConfig.initialized():
        return set()
    return {o.split("=", 1)[0].lstrip("+~") for o in HydraConfig.get().overrides.task}
