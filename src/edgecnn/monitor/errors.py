"""The monitor's errors, and the lazy import of its optional extra."""

from __future__ import annotations

import importlib.util

from edgecnn.errors import EdgeCNNError

INSTALL_HINT = "pip install 'edgecnn[monitor]'"


class MonitorError(EdgeCNNError):
    """The monitor cannot start or run: a missing extra, a port in use, a source that fails."""


def require(package: str) -> None:
    """Raises MonitorError naming the extra unless ``package`` (of the `monitor` extra) is installed."""
    if importlib.util.find_spec(package) is None:
        raise MonitorError(f"edgecnn monitor needs {package}, which is not installed: {INSTALL_HINT}")
