"""Compiled CPU kernels (numba), registered for the "cpu" backend when this package is imported.
Each is tested against the op's numpy reference kernel (tests/kernels/)."""

from edgecnn.kernels.cpu import conv, dense, eltwise, lrn, pool  # noqa: F401  (importing registers them)
from edgecnn.kernels.cpu.threads import cpu_threads

__all__ = ["cpu_threads"]
