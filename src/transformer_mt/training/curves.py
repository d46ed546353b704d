"""Learning curves in the run directory, for those who use no dashboard: `plot_dir/curves.csv`
(step, metric, value), rewritten after every validation, and `plot_dir/curves.png` (train loss,
val loss, val BLEU against the step), drawn at the end of training (`task=report` draws a
sweep's). The history is part of the callback's checkpoint state, so a resumed run draws the whole
curve."""

import csv
import time
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback

from transformer_mt import plots
from transformer_mt.atomic import atomic_file
from transformer_mt.training.steps import StepWatch

VAL_KEYS = ("val/loss", "val/bleu")


def read_curves(path: Path) -> dict[str, list[tuple[int, float]]]:
    """curves.csv as {metric: [(step, value)]}."""
    curves: dict[str, list[tuple[int, float]]] = {}
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            curves.setdefault(row["metric"], []).append((int(row["step"]), float(row["value"])))
    return curves


class LearningCurves(Callback):
    """train/loss is the mean over the optimizer steps since the last point, recorded on logging
    steps (training/steps.py) and at each validation; val/loss and val/bleu are
    recorded at every validation."""

    def __init__(self, plot_dir: str) -> None:
        self.plot_dir = Path(plot_dir)
        self.history: list[tuple[int, str, float]] = []
        self._loss_sum: torch.Tensor | float = 0.0
        self._batches: torch.Tensor | int = 0
        self._recorded_step = -1
        self.seconds: list[float] = []  # time spent writing, per write
        self.watch = StepWatch()

    def state_dict(self) -> dict:
        return {"history": [list(point) for point in self.history]}

    def load_state_dict(self, state_dict: dict) -> None:
        self.history = [(int(s), str(k), float(v)) for s, k, v in state_dict.get("history", [])]

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch, batch_idx: int) -> None:
        self.watch.start(trainer)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch,
                           batch_idx: int) -> None:
        loss = (outputs or {}).get("loss")
        if loss is None:
            return
        finite = torch.isfinite(loss.detach())  # a NaN / inf step is skipped (training/guard.py): not on the curve
        self._loss_sum = self._loss_sum + torch.where(finite, loss.detach(), 0.0)  # on the device: no sync per batch
        self._batches = self._batches + finite
        if self.watch.logged(trainer):
            self.record_train_loss(trainer.global_step)

    def record_train_loss(self, step: int) -> None:
        """The mean train loss of the batches since the last point, as the point of `step`."""
        if step > 0 and step != self._recorded_step and int(self._batches):  # int(): a sync, so last
            self.history.append((step, "train/loss", float(self._loss_sum) / int(self._batches)))
            self._loss_sum, self._batches, self._recorded_step = 0.0, 0, step

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        results = pl_module.results.get("val")
        if trainer.sanity_checking or results is None:
            return
        self.record_train_loss(trainer.global_step)
        self.history += [(trainer.global_step, key, float(results.metrics[key])) for key in VAL_KEYS]
        self.write(trainer, plot=False)

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.write(trainer, plot=True)

    def write(self, trainer: L.Trainer, plot: bool) -> None:
        """curves.csv, and with plot curves.png (drawing takes a few tenths of a second)."""
        if not trainer.is_global_zero or not self.history:
            return
        started = time.perf_counter()
        with atomic_file(self.plot_dir / "curves.csv") as tmp, open(tmp, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["step", "metric", "value"])
            writer.writerows(self.history)
        if not plot:
            self.seconds.append(time.perf_counter() - started)
            return
        series: dict[str, list[tuple[int, float]]] = {}
        for step, key, value in self.history:
            series.setdefault(key, []).append((step, value))
        plots.save(plots.curves_figure({"run": series}, self.plot_dir.parent.name), self.plot_dir / "curves.png")
        self.seconds.append(time.perf_counter() - started)
