"""Config helpers every layer may import (they need only OmegaConf)."""

from omegaconf import DictConfig, ListConfig, OmegaConf


def plain(value):
    """DictConfig / ListConfig -> dict / list (resolved); anything else unchanged."""
    return OmegaConf.to_container(value, resolve=True) if isinstance(value, DictConfig | ListConfig) else value
