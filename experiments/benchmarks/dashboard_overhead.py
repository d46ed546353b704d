"""What the dashboards cost: the same training run with the dashboard callbacks (logger=many, tables,
heatmaps, curves) and without them (logger=csv, those callbacks removed), one after the other.

    python experiments/benchmarks/dashboard_overhead.py [OVERRIDE ...]    # default: the toy job

OVERRIDEs go to both runs. Prints the callbacks' time per validation, the validation and training
time, and the ratio of the two runs' fit times.
"""

import os
import sys
import tempfile
import time
from pathlib import Path

import harness
import lightning as L
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import open_dict

ROOT = harness.ROOT
os.environ.setdefault("PROJECT_ROOT", str(ROOT))
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")

from transformer_mt.markdown import markdown_table  # noqa: E402
from transformer_mt.tasks import train  # noqa: E402
from transformer_mt.tasks.options import register  # noqa: E402
from transformer_mt.training.curves import LearningCurves  # noqa: E402
from transformer_mt.training.dashboard import TranslationDashboard  # noqa: E402

OFF = ["logger=csv", "~callbacks.dashboard", "~callbacks.learning_curves"]
TIMER = "+callbacks.validation_clock._target_=__main__.ValidationClock"


class ValidationClock(L.Callback):
    """Sums the wall time of the validation loops (listed last, so its end includes the others' hooks)."""

    last: "ValidationClock | None" = None  # the one the latest run built (Hydra instantiates it)

    def __init__(self) -> None:
        self.seconds, self._start = 0.0, 0.0
        self.callbacks: list[L.Callback] = []
        ValidationClock.last = self

    def on_fit_start(self, trainer, pl_module) -> None:
        self.callbacks = list(trainer.callbacks)

    def on_validation_start(self, trainer, pl_module) -> None:
        self._start = time.perf_counter()

    def on_validation_end(self, trainer, pl_module) -> None:
        self.seconds += time.perf_counter() - self._start


def configure(output_dir: Path, overrides: list[str]):
    GlobalHydra.instance().clear()
    register()  # as run.py does
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        cfg = compose(config_name="config", return_hydra_config=True, overrides=overrides)
    with open_dict(cfg):
        cfg.paths.output_dir = str(output_dir)
        cfg.hydra.runtime.output_dir = str(output_dir)
        cfg.hydra.job.num = 0
    HydraConfig().set_config(cfg)
    return cfg


def timed_run(output_dir: Path, overrides: list[str]) -> dict:
    """Train once; the fit and validation times and the dashboard callbacks' own timings."""
    started = time.perf_counter()
    metrics = train.run(configure(output_dir, [*overrides, TIMER]))
    total = time.perf_counter() - started
    clock = ValidationClock.last
    dashboard = next((c for c in clock.callbacks if isinstance(c, TranslationDashboard)), None)
    curves = next((c for c in clock.callbacks if isinstance(c, LearningCurves)), None)
    return {"total": total, "train": metrics["train_seconds"], "validate": clock.seconds,
            "validations": len(dashboard.seconds) if dashboard else None, "steps": metrics["steps"],
            "dashboard": dashboard.seconds if dashboard else [], "curves": curves.seconds if curves else []}


def main(overrides: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        on = timed_run(Path(tmp) / "on", ["logger=many", *overrides])
        off = timed_run(Path(tmp) / "off", [*OFF, *overrides])
    n = on["validations"]
    dash, curves = sum(on["dashboard"]), sum(on["curves"])
    print(f"overrides: {' '.join(overrides) or '(none: the toy default job)'}; {on['steps']} steps, {n} validations; "
          f"{harness.described(harness.machine())}")
    names = (("train", "fit (train + validation), s"), ("validate", "validation loops (with their callbacks), s"),
             ("total", "whole run incl. test, s"))
    rows = [[name, f"{on[key]:.1f}", f"{off[key]:.1f}", f"{on[key] / off[key]:.3f}"] for key, name in names]
    print(markdown_table(["", "with dashboards", "without", "ratio"], rows, right=(1, 2, 3)))
    print(f"\ntables + heatmaps per validation: {dash / n:.3f} s; curves per write: "
          f"{curves / max(len(on['curves']), 1):.3f} s ({len(on['curves'])} writes)")
    print(f"callbacks' own time / fit time (with dashboards): {(dash + curves) / on['train']:.3%}")


if __name__ == "__main__":
    main(sys.argv[1:])
