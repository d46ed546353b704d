"""RNG state in checkpoints, so that a resumed run draws the dropout masks an uninterrupted one draws."""

import logging
import random

import lightning as L
import numpy as np
import torch
import torch.distributed as dist
from lightning.pytorch.callbacks import Callback

log = logging.getLogger(__name__)


def collect_rng_states() -> dict:
    """This process's python, numpy, torch and CUDA RNG states as plain data (weights_only loads it)."""
    name, keys, pos, has_gauss, gauss = np.random.get_state()
    states = {"torch": torch.get_rng_state(), "numpy": [name, keys.tolist(), pos, has_gauss, gauss],
              "python": random.getstate()}
    if torch.cuda.is_available():
        states["torch.cuda"] = torch.cuda.get_rng_state_all()
    return states


def restore_rng_states(states: dict) -> None:
    """Undo collect_rng_states."""
    torch.set_rng_state(states["torch"])
    if "torch.cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["torch.cuda"])
    name, keys, pos, has_gauss, gauss = states["numpy"]
    np.random.set_state((name, np.array(keys, dtype=np.uint32), pos, has_gauss, gauss))
    version, internal, gauss_next = states["python"]
    random.setstate((version, tuple(internal), gauss_next))


class RngState(Callback):
    """Saves every rank's RNG states in each checkpoint written while training (`rng_states`, rank 0
    first) and, when training resumes from one, puts back this rank's before the first step."""

    def __init__(self) -> None:
        self.loaded: list[dict] | None = None  # from the checkpoint being resumed

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict) -> None:
        if trainer.state.fn == "fit":
            checkpoint["rng_states"] = self.gather()

    @staticmethod
    def gather() -> list[dict]:
        """The RNG states of every rank, rank 0 first."""
        states = collect_rng_states()
        if dist.is_available() and dist.is_initialized():
            gathered = [None] * dist.get_world_size()
            dist.all_gather_object(gathered, states)
            return gathered
        return [states]

    def on_load_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict) -> None:
        self.loaded = checkpoint.get("rng_states")

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.loaded and len(self.loaded) == trainer.world_size:
            restore_rng_states(self.loaded[trainer.global_rank])
        elif self.loaded:
            log.warning("the checkpoint's RNG states are from %d processes, this run has %d: not restored",
                        len(self.loaded), trainer.world_size)
        self.loaded = None
