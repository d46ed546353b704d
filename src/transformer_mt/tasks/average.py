"""task=average: average the parameters of several checkpoints into a new checkpoint
(checkpoints/averaging.py).

    python run.py task=average ckpt_path=[a.ckpt,b.ckpt] [task.output=avg.ckpt]
    python run.py task=average task.run_dir=outputs/train/<run> task.last_n=5   # the last 5 epochs
    python run.py task=average task.run_dir=outputs/train/<run> task.best_n=5   # the 5 best by val/bleu
"""

from pathlib import Path

from omegaconf import DictConfig

from transformer_mt.checkpoints.averaging import epoch_checkpoints, epoch_folder, write_average
from transformer_mt.checkpoints.files import checkpoint_paths
from transformer_mt.checkpoints.loading import read_checkpoint
from transformer_mt.errors import DataError


def select_checkpoints(cfg: DictConfig) -> list[Path]:
    """ckpt_path=[...], or the task.last_n / task.best_n epoch checkpoints of task.run_dir (one way:
    AverageTask.run_refusal)."""
    options = cfg.task
    if cfg.get("ckpt_path"):
        return checkpoint_paths(cfg)
    run_dir = Path(options.run_dir)
    folder, found = epoch_folder(run_dir), epoch_checkpoints(run_dir)
    if not found:
        raise DataError(f"task.run_dir={options.run_dir}: no epoch checkpoints in {folder}")
    n = int(options.last_n or options.best_n)
    if n > len(found):
        raise DataError(f"task.{'last_n' if options.last_n else 'best_n'}={n}, but {folder} has only {len(found)}")
    if options.last_n:
        return found[-n:]
    scored = [(read_checkpoint(p, key="task.run_dir").get("val_bleu"), p) for p in found]
    unscored = [p for s, p in scored if s is None]
    if unscored:
        raise DataError(f"{unscored[0]}: no val_bleu recorded, so task.best_n cannot rank it")
    return [p for _, p in sorted(scored, key=lambda sp: -sp[0])[:n]]


def run(cfg: DictConfig) -> dict:
    paths = select_checkpoints(cfg)
    output = Path(cfg.task.output) if cfg.task.get("output") else Path(cfg.paths.output_dir) / "average.ckpt"
    write_average(paths, output, cfg.get("progress"))
    print(output)
    return {"output": str(output), "checkpoints": [str(p) for p in paths]}
