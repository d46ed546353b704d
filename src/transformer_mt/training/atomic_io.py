"""Every checkpoint written atomically: a kill at any moment leaves the previous file whole."""

from typing import Any

import torch
from lightning.pytorch.plugins.io import TorchCheckpointIO

from transformer_mt.atomic import atomic_file


class AtomicCheckpointIO(TorchCheckpointIO):
    """Writes a checkpoint to a temporary file beside its destination, fsyncs it and renames it into
    place, so a kill at any moment leaves the previous file whole. (Lightning's own writer stages
    the file in $TMPDIR and, when that is another filesystem, copies it over the old checkpoint.)
    torch.save writes to a Python file, so that a full disk is an OSError (ENOSPC: one line naming
    the checkpoint) and not torch's own writer's "unexpected pos"."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path, storage_options: Any | None = None) -> None:
        if storage_options is not None:
            raise TypeError(f"{type(self).__name__} takes no storage_options, got {storage_options!r}")
        with atomic_file(path) as tmp, open(tmp, "wb") as f:
            torch.save(checkpoint, f)
