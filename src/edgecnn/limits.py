"""The memory budget: sizes that a file, an option or a plan declares are checked before allocating.

A small file can declare a huge tensor (a zlib stream that inflates to gigabytes, a Darknet layer
with a billion anchors, a Reshape to terabytes). Loaders and the planner add up what they are about
to allocate in a :class:`Tally` and refuse, with the error type of their layer, as soon as the total
would pass the budget, so the refusal costs nothing but the arithmetic.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from edgecnn.errors import ConfigurationError, EdgeCNNError, ModelFormatError, ModelNotFoundError

FALLBACK_MEMORY = 4 << 30
"""Memory assumed available where the OS does not say (no /proc/meminfo, no sysconf)."""

MIN_DEFAULT_LIMIT = 256 << 20
"""The default budget never goes below this, so a loaded machine can still run a small model."""

DEFAULT_SHARE = 0.8
"""The default budget's share of the memory available when a model is loaded."""


def available_memory() -> int:
    """Bytes of memory available now: MemAvailable on Linux, else physical memory, else a fallback."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return FALLBACK_MEMORY


def default_memory_limit() -> int:
    """The budget when none is given: most of the memory available now, at least MIN_DEFAULT_LIMIT."""
    return max(MIN_DEFAULT_LIMIT, int(available_memory() * DEFAULT_SHARE))


def format_bytes(nbytes: float) -> str:
    """``1.5 GiB``-style sizes for messages (a declared size may pass what a float holds)."""
    if isinstance(nbytes, int) and nbytes >= 1 << 60:
        return f"{nbytes >> 50:,} PiB"
    size = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(size) < 1024 or unit == "PiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str, what: str) -> int:
    """A byte count written as ``1073741824``, ``512M``, ``2G`` or ``1.5GiB`` (binary units);
    anything else, or a size under one byte, is a ConfigurationError naming ``what``."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*([kmgt]?)(?:i?b)?\s*", text, re.IGNORECASE)
    if match is None:
        raise ConfigurationError(f"{what} must be a size such as 512M or 2G, got {text!r}")
    size = int(float(match.group(1)) * _SIZE_UNITS[match.group(2).lower()])
    if size < 1:
        raise ConfigurationError(f"{what} must be at least one byte, got {text!r}")
    return size


@dataclass(frozen=True)
class MemoryBudget:
    """At most ``limit`` bytes for one model's tensors (weights, decoded sections, the arena)."""

    limit: int

    @staticmethod
    def default() -> MemoryBudget:
        """The budget of the load in progress (``using_budget``: ``edgecnn.load``'s memory_limit),
        else most of the memory available now. Loaders take ``budget=None`` to mean this one."""
        active = _ACTIVE_BUDGET.get()
        return active if active is not None else MemoryBudget(default_memory_limit())

    def check(self, nbytes: int, what: str, error: type[EdgeCNNError]) -> None:
        """Raise ``error`` naming ``what`` if ``nbytes`` alone passes the budget."""
        if nbytes > self.limit:
            raise error(
                f"{what} needs {format_bytes(nbytes)}, over the memory limit of {format_bytes(self.limit)}"
            )

    def tally(self, what: str, error: type[EdgeCNNError]) -> Tally:
        """A running total for one load or plan (``what``: the file or graph) against this budget."""
        return Tally(self, what, error)


_ACTIVE_BUDGET: ContextVar[MemoryBudget | None] = ContextVar("edgecnn_memory_budget", default=None)


@contextmanager
def using_budget(budget: MemoryBudget) -> Iterator[None]:
    """``MemoryBudget.default()`` is ``budget`` inside the block (this thread or task only), so
    that every loader a load reaches uses the budget its caller chose."""
    token = _ACTIVE_BUDGET.set(budget)
    try:
        yield
    finally:
        _ACTIVE_BUDGET.reset(token)


class Tally:
    """Bytes about to be allocated, added up item by item and refused before the budget is passed."""

    def __init__(self, budget: MemoryBudget, what: str, error: type[EdgeCNNError]) -> None:
        self.budget = budget
        self.what = what
        self.error = error
        self.total = 0

    def add(self, nbytes: int, item: str) -> None:
        """Count ``nbytes`` for ``item``; raise before the total passes the budget."""
        if nbytes < 0:
            raise self.error(f"{self.what}: {item} declares a negative size")
        if self.total + nbytes > self.budget.limit:
            raise self.error(
                f"{self.what}: {item} needs {format_bytes(nbytes)}, which takes the total to "
                f"{format_bytes(self.total + nbytes)}, over the memory limit of "
                f"{format_bytes(self.budget.limit)}"
            )
        self.total += nbytes


def regular_file_size(path: str | os.PathLike[str], role: str = "model file") -> int:
    """The size of ``path`` after checking it is a regular file (symlinks followed).

    Devices (``/dev/zero``), FIFOs and sockets would be read without bound or block for ever;
    directories fail later with a bare OSError. ``role`` names the file in messages
    ("model file", "weights file")."""
    name = os.fspath(path)
    try:
        info = os.stat(name)
    except FileNotFoundError:
        raise ModelNotFoundError(f"{role} not found: {name}") from None
    except OSError as exc:
        raise ModelFormatError(f"{role} {name}: cannot be read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(info.st_mode):
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise ModelFormatError(f"{role} {name} is {kind}")
    return info.st_size


def read_file_bounded(path: str | os.PathLike[str], budget: MemoryBudget, role: str = "model file") -> bytes:
    """The whole of a regular file, refused before reading if it alone passes ``budget``."""
    size = regular_file_size(path, role)
    budget.check(size, f"{role} {os.fspath(path)}", ModelFormatError)
    try:
        with open(path, "rb") as file:
            data = file.read(size + 1)
    except OSError as exc:
        raise ModelFormatError(f"{role} {os.fspath(path)}: cannot be read ({exc.strerror or exc})") from None
    if len(data) > size:
        raise ModelFormatError(f"{role} {os.fspath(path)} grew while it was read")
    return data
