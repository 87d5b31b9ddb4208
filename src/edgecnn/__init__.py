"""edgecnn: a CNN inference engine for the CPUs of edge and embedded devices."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from edgecnn.errors import (
    ConfigurationError,
    DeviceError,
    EdgeCNNError,
    GraphError,
    InputError,
    ModelFormatError,
    ModelNotFoundError,
    UnsupportedOperatorError,
)

__version__ = "0.1.0"

__all__ = [
    "ConfigurationError",
    "DeviceError",
    "EdgeCNNError",
    "GraphError",
    "InputError",
    "Model",
    "ModelFormatError",
    "ModelNotFoundError",
    "TensorSpec",
    "UnsupportedOperatorError",
    "__version__",
    "load",
]

if TYPE_CHECKING:
    from edgecnn.api import load
    from edgecnn.ir.graph import TensorSpec
    from edgecnn.model import Model

_LAZY = {"load": "edgecnn.api", "Model": "edgecnn.model", "TensorSpec": "edgecnn.ir.graph"}


def __getattr__(name: str) -> Any:
    """Import heavy modules only when first used, so `import edgecnn` stays fast."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'edgecnn' has no attribute {name!r}")
