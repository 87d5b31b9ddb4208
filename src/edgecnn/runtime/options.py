"""RuntimeOptions: the one frozen bag of settings a Model runs with.

:meth:`RuntimeOptions.resolve` is the one place the runtime's environment variables are read
(``EDGECNN_NUM_THREADS``, ``EDGECNN_BIND_THREADS``, ``EDGECNN_MEMORY_LIMIT``); it is called at the API and CLI boundary, and
everything below receives the resolved options.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from edgecnn.devices import available_cores, find_device, parse_device
from edgecnn.errors import ConfigurationError
from edgecnn.limits import MemoryBudget, default_memory_limit, parse_size

if TYPE_CHECKING:
    from edgecnn.kernels.cpu.tuning_record import CpuTuning

BATCH_POLICIES = ("auto", "never", "always")
"""How a batch is parallelised (runtime/batch.py): "auto" splits it where measured to pay,
"always" wherever the model allows, "never" leaves the threads to each layer."""

_FALSE = ("0", "false", "no", "off")
_TRUE = ("1", "true", "yes", "on")


@dataclass(frozen=True)
class RuntimeOptions:
    """Settings of one Model, fixed when it is loaded."""

    threads: int
    device: str = "cpu"
    optimize: bool = True  # run the graph passes (edgecnn.passes) before planning
    batch_parallel: str = "auto"  # one of BATCH_POLICIES
    bind_threads: bool = True
    """Bind each CPU pool worker to a core of its own (kernels/cpu/system/affinity.py)."""
    cpu_tuning: CpuTuning | None = None
    """The CPU kernels' measured thresholds; None means the documented defaults (experiments override it)."""
    memory_limit: int = field(default_factory=default_memory_limit)
    """Bytes one model may hold (weights, plans, arenas); loading and planning refuse beyond it."""

    @property
    def budget(self) -> MemoryBudget:
        return MemoryBudget(self.memory_limit)

    def on_device(self, device: str) -> RuntimeOptions:
        """These options with ``device`` (checked as ``resolve`` checks it), the environment not read again."""
        name = parse_device(device).name
        if name.startswith(("opencl", "cuda")):
            find_device(name)
        return replace(self, device=name)

    @staticmethod
    def resolve(
        threads: int | None = None,
        device: str = "cpu",
        optimize: bool = True,
        batch_parallel: str = "auto",
        bind_threads: bool | None = None,
        cpu_tuning: CpuTuning | None = None,
        memory_limit: int | str | None = None,
    ) -> RuntimeOptions:
        """Fill defaults and check values: ``threads`` from the argument, else EDGECNN_NUM_THREADS,
        else all cores; ``bind_threads`` from the argument, else EDGECNN_BIND_THREADS (0/false/no: off),
        else on; ``memory_limit`` (bytes, or a size such as "2G") from the argument, else
        EDGECNN_MEMORY_LIMIT, else most of the memory available now (limits.default_memory_limit).
        A bad value raises ConfigurationError; a missing OpenCL/CUDA device, DeviceError."""
        if threads is None:
            threads = _env_threads()
        if isinstance(threads, bool) or not isinstance(threads, int):
            raise ConfigurationError(f"threads must be an integer, got {threads!r}")
        if threads < 1:
            raise ConfigurationError(f"threads must be >= 1, got {threads}")
        if batch_parallel not in BATCH_POLICIES:
            raise ConfigurationError(
                f"batch_parallel must be one of {', '.join(BATCH_POLICIES)}, got {batch_parallel!r}"
            )
        if bind_threads is None:
            bind_threads = _env_flag("EDGECNN_BIND_THREADS", default=True)
        limit = _memory_limit(memory_limit)
        name = parse_device(device).name
        if name.startswith(("opencl", "cuda")):
            find_device(name)  # a missing device fails at load, not at the first run
        return RuntimeOptions(
            threads=threads,
            device=name,
            optimize=optimize,
            batch_parallel=batch_parallel,
            bind_threads=bind_threads,
            cpu_tuning=cpu_tuning,
            memory_limit=limit,
        )


def _memory_limit(value: int | str | None) -> int:
    """The memory limit in bytes: ``value``, else EDGECNN_MEMORY_LIMIT, else the machine's default."""
    if value is None:
        text = os.environ.get("EDGECNN_MEMORY_LIMIT", "").strip()
        return parse_size(text, "EDGECNN_MEMORY_LIMIT") if text else default_memory_limit()
    if isinstance(value, str):
        return parse_size(value, "memory_limit")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"memory_limit must be a positive number of bytes, got {value!r}")
    return value


def _env_threads() -> int:
    """EDGECNN_NUM_THREADS if set, else every core this process may use."""
    text = os.environ.get("EDGECNN_NUM_THREADS", "").strip()
    if not text:
        return available_cores()
    try:
        return int(text)
    except ValueError:
        raise ConfigurationError(f"EDGECNN_NUM_THREADS must be an integer, got {text!r}") from None


def _env_flag(name: str, default: bool) -> bool:
    """A yes/no environment variable; unset or empty means ``default``."""
    text = os.environ.get(name, "").strip().lower()
    if not text:
        return default
    if text in _FALSE:
        return False
    if text in _TRUE:
        return True
    raise ConfigurationError(f"{name} must be 0/1, true/false, yes/no or on/off, got {text!r}")
