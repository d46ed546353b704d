"""`ckpt_path=last`: a training command that can be run again until its run is done, as fairseq's
checkpoint_last.pt and Lightning's `ckpt_path="last"` make it. In the run's own folder
(`paths.output_dir`, e.g. `hydra.run.dir=...` or a multirun job's `N/`):
- metrics.json (the run finished and was tested): nothing is trained; the task returns that
  metrics.json, so that a multirun or an Optuna search that runs again counts it as it was;
- else checkpoints/last.ckpt (the run was stopped): training resumes from it, bit for bit;
- else: a fresh run.
Study scripts are then plain lists of `python run.py ... ckpt_path=last` commands."""

import json
import logging
from pathlib import Path

from omegaconf import DictConfig, open_dict

from transformer_mt.choices import OWN_LAST

log = logging.getLogger(__name__)


def finished_metrics(cfg: DictConfig) -> dict | None:
    """With ckpt_path=last, the metrics.json of the run folder's finished run (None: none, or another
    ckpt_path)."""
    if cfg.get("ckpt_path") != OWN_LAST:
        return None
    metrics = Path(cfg.paths.output_dir) / "metrics.json"
    if not metrics.is_file():
        return None
    log.info("ckpt_path=last: %s says this run is done; nothing is trained (to train it on: "
             "ckpt_path=%s)", metrics, metrics.parent / "checkpoints" / "last.ckpt")
    return json.loads(metrics.read_text(encoding="utf-8"))


def own_last(cfg: DictConfig) -> DictConfig:
    """`cfg` with ckpt_path=last replaced by the run folder's checkpoints/last.ckpt, or by null when
    there is none yet (a fresh run); any other ckpt_path unchanged."""
    if cfg.get("ckpt_path") != OWN_LAST:
        return cfg
    last = Path(cfg.paths.output_dir) / "checkpoints" / "last.ckpt"
    log.info("ckpt_path=last: %s", f"resuming from {last}" if last.is_file() else f"no {last} yet: a fresh run")
    with open_dict(cfg):
        cfg.ckpt_path = str(last) if last.is_file() else None
    return cfg
