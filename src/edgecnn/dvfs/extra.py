"""The lazy import of the `governor` and `plot` extras' packages."""

from __future__ import annotations

import importlib.util

from edgecnn.errors import ConfigurationError

EXTRAS = {"dtaidistance": "governor", "psutil": "governor", "matplotlib": "plot"}


def require(package: str) -> None:
    """Raises ConfigurationError naming the extra unless ``package`` is installed."""
    if importlib.util.find_spec(package) is None:
        extra = EXTRAS[package]
        raise ConfigurationError(
            f"this needs {package}, which is not installed: pip install 'edgecnn[{extra}]'"
        )
