"""One Python loop compiled twice: with a parallel region, and without one for small layers, where
waking numba's workers costs as much as the work (``prange`` runs as ``range`` in the serial build)."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import numba


def _renamed(function: Callable[..., Any], name: str) -> Callable[..., Any]:
    """A copy of ``function`` under another name: numba's on-disk cache keys compiled code by the
    function's name and bytecode, not by the compile flags, so two builds of one function would
    overwrite each other's cache entries."""
    copy = types.FunctionType(function.__code__, function.__globals__, name, function.__defaults__)
    copy.__qualname__ = name
    copy.__doc__ = function.__doc__
    return copy


def parallel_and_serial(function: Callable[..., Any], name: str) -> tuple[Any, Any]:
    """``function`` compiled as ``name`` (parallel) and ``name_serial`` (no parallel region)."""
    parallel = numba.njit(parallel=True, nogil=True, cache=True)(_renamed(function, name))
    serial = numba.njit(nogil=True, cache=True)(_renamed(function, f"{name}_serial"))
    return parallel, serial
