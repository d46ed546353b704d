"""The user's cache folder: what belongs to this machine or to a checkpoint rather than to a run
(the kernels chosen per CPU: model/kernels.py; CTranslate2's conversions of a checkpoint whose
folder cannot hold them: inference/ct2_engine.py)."""

import os
from pathlib import Path


def user_cache() -> Path:
    """$TRANSFORMER_MT_CACHE, else ($XDG_CACHE_HOME or ~/.cache)/transformer_mt."""
    if os.environ.get("TRANSFORMER_MT_CACHE"):
        return Path(os.environ["TRANSFORMER_MT_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "transformer_mt"
