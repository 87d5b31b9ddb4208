"""Exception hierarchy: one type per family of failure, each message says what and where."""

from __future__ import annotations

MAX_MESSAGE_CHARS = 1000
"""Messages longer than this keep their start and end with the middle elided: a damaged file can
name a million tensors, and a one-line error must stay one readable line."""


class EdgeCNNError(Exception):
    """Base class of every error edgecnn raises on purpose; its message has a bounded length."""

    def __init__(self, *args: object) -> None:
        if args and isinstance(args[0], str) and len(args[0]) > MAX_MESSAGE_CHARS:
            text = args[0]
            keep = (MAX_MESSAGE_CHARS - 40) // 2  # 40: room for the marker
            elided = len(text) - 2 * keep
            args = (f"{text[:keep]} ... [{elided} characters elided] ... {text[-keep:]}", *args[1:])
        super().__init__(*args)


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
