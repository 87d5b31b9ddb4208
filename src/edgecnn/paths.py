"""The one per-user cache directory edgecnn writes to (kernel tuning, saved plans, benchmark models).

Order of precedence: ``$EDGECNN_CACHE_DIR``, else ``$XDG_CACHE_HOME/edgecnn``, else
``~/.cache/edgecnn``. Empty or blank variables count as unset; ``~`` is expanded.
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "EDGECNN_CACHE_DIR"


def cache_dir(*parts: str) -> Path:
    """The cache directory, or ``parts`` joined under it (nothing is created here)."""
    override = os.environ.get(CACHE_ENV, "").strip()
    if override:
        root = Path(override).expanduser()
    else:
        base = os.environ.get("XDG_CACHE_HOME", "").strip()
        root = (Path(base).expanduser() if base else Path.home() / ".cache") / "edgecnn"
    return root.joinpath(*parts)
