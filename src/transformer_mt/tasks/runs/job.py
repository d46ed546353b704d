"""The job of a config that passed its checks (transformer_mt.tasks.run): Lightning's log lines
through the job's logging once, the resolved config saved in the run directory, and
the task class's runner (tasks/options) with float32 matmuls at `float32_matmul_precision` while it runs."""

import gc
from pathlib import Path

import torch
from lightning.pytorch.utilities import rank_zero_only
from omegaconf import DictConfig, OmegaConf

from transformer_mt.tasks.runs.lightning_logs import route_lightning_logs


def run_checked(cfg: DictConfig):
    """The metrics the task's runner returns (the function its class names: tasks/options)."""
    if not gc.get_freeze_count():  # once a process: a sweep's later jobs would freeze the garbage of earlier ones
        gc.freeze()  # the objects of torch's and Lightning's imports, never scanned again (~0.5 s a process)
    route_lightning_logs()
    save_resolved_config(cfg)
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(cfg.float32_matmul_precision)
    try:
        return OmegaConf.get_type(cfg, "task").runner(cfg)
    finally:
        torch.set_float32_matmul_precision(before)


@rank_zero_only
def save_resolved_config(cfg: DictConfig) -> None:
    output_dir = Path(cfg.paths.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(cfg, output_dir / "config.yaml", resolve=True)
