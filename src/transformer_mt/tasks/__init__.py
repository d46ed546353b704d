"""Tasks: one Hydra config in, one job out. `cfg.task._target_` names the task's `run`."""

from pathlib import Path

from hydra.utils import get_method
from lightning.pytorch.utilities import rank_zero_only
from omegaconf import DictConfig, OmegaConf


def run(cfg: DictConfig):
    """Save the resolved config in the run directory, then run cfg.task._target_(cfg)."""
    save_resolved_config(cfg)
    return get_method(cfg.task._target_)(cfg)


@rank_zero_only
def save_resolved_config(cfg: DictConfig) -> None:
    output_dir = Path(cfg.paths.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(cfg, output_dir / "config.yaml", resolve=True)
