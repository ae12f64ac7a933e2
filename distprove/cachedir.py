"""distprove's on-disk cache folder (compiled CUDA kernels, built native witness generators)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """``$DISTPROVE_CACHE_DIR``, or ``~/.cache/distprove`` when it is unset or empty."""
    env = os.environ.get("DISTPROVE_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "distprove"
