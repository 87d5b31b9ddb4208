"""Exception hierarchy: one type per family of failure, each message says what and where."""

from __future__ import annotations


class EdgeCNNError(Exception):
    """Base class of every error edgecnn raises on purpose."""


class ModelFormatError(EdgeCNNError):
    """A model file is missing, damaged, or not in a format edgecnn reads."""


class ModelNotFoundError(ModelFormatError, FileNotFoundError):
    """The model (or weights) file does not exist."""


class GraphError(EdgeCNNError):
    """The graph is inconsistent: dangling inputs, cycles, bad attributes, shape mismatches."""


class UnsupportedOperatorError(GraphError, ModelFormatError):
    """The model uses operators edgecnn does not implement; lists every one of them.

    Also a ModelFormatError: to someone loading a file, it is a file edgecnn cannot read."""

    def __init__(self, unsupported: list[tuple[str, str]], source: str = "") -> None:
        self.unsupported = list(unsupported)
        ops = sorted({op for op, _ in self.unsupported})
        where = ", ".join(f"{name or '<unnamed>'} ({op})" for op, name in self.unsupported)
        prefix = f"{source}: " if source else ""
        super().__init__(f"{prefix}unsupported operator(s) {', '.join(ops)} at node(s): {where}")


class InputError(EdgeCNNError, ValueError):
    """Inputs given to a model do not match what it expects (name, shape or dtype)."""


class DeviceError(EdgeCNNError):
    """A requested device is unknown, unavailable, or failed."""


class ConfigurationError(EdgeCNNError, ValueError):
    """A runtime option or EDGECNN_* environment variable has a value edgecnn cannot use."""
