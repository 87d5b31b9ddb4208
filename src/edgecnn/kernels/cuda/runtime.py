"""One CUDA GPU as the kernels see it: its CuPy device, the compiled module of source.SOURCE (built
once per device and process) and 1-D launches. CuPy is imported here, on first use, never before."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from edgecnn.devices import active_device
from edgecnn.errors import DeviceError
from edgecnn.kernels.cuda.source import SOURCE
from edgecnn.kernels.gpu.step import MAX_ELEMENTS

BLOCK = 256
"""Threads per block of the 1-D kernels."""


def import_cupy() -> Any:
    """The cupy module, or a DeviceError that says how to install it."""
    try:
        import cupy
    except ImportError:
        raise DeviceError(
            "the CUDA backend needs CuPy: pip install 'edgecnn[cuda]' (cupy-cuda12x; for CUDA 13 "
            "install cupy-cuda13x) and an NVIDIA driver"
        ) from None
    return cupy


class CudaDevice:
    """``cuda:index``: the CuPy device (entered around every launch and allocation, so that several
    GPUs work from one thread) and the compiled kernels."""

    def __init__(self, index: int, cupy: Any) -> None:
        self.index = index
        self.cupy = cupy
        self.cuda = cupy.cuda.Device(index)
        self._module: Any = None
        self._blas: Any = None
        self._kernels: dict[str, Any] = {}
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return f"cuda:{self.index}"

    def kernel(self, name: str) -> Any:
        """The named kernel of source.SOURCE (module compiled on first use)."""
        found = self._kernels.get(name)
        if found is None:
            with self._lock, self.cuda:
                try:  # NVRTC compiles the module on the first lookup
                    if self._module is None:
                        self._module = self.cupy.RawModule(code=SOURCE, options=("--std=c++14",))
                    found = self._kernels.setdefault(name, self._module.get_function(name))
                except self.cupy.cuda.compiler.CompileException as exc:  # carries the NVRTC log
                    raise DeviceError(f"{self.name}: CUDA kernels failed to compile: {exc}") from exc
        return found

    @property
    def blas(self) -> Any:
        """Direct cuBLAS GEMMs (kernels.cuda.blas.Blas), set up on first use."""
        if self._blas is None:
            from edgecnn.kernels.cuda.blas import Blas

            self._blas = Blas(self.cupy)
        return self._blas

    def launch(self, name: str, total: int, *args: Any) -> None:
        """Kernel ``name`` over ``total`` threads; its first argument is ``total`` (int32), then ``args``,
        whose Python scalars must already be np.int32/np.float32 (CuPy passes a Python int as 64 bits)."""
        if total <= 0:
            return
        if total > MAX_ELEMENTS:
            raise DeviceError(f"{self.name}: {name} over {total} threads exceeds 32-bit indexing")
        kernel = self.kernel(name)
        grid = (total + BLOCK - 1) // BLOCK
        with self.cuda:
            kernel((grid,), (BLOCK,), (np.int32(total), *args))

    def empty(self, shape: tuple[int, ...]) -> Any:
        """An uninitialised float32 cupy array on this device."""
        with self.cuda:
            return self.cupy.empty(shape, dtype=self.cupy.float32)

    def upload(self, array: Any) -> Any:
        """A host array copied to this device as a C-contiguous float32 cupy array."""
        host = np.asarray(array, dtype=np.float32, order="C")  # ascontiguousarray would make 0-d 1-d
        with self.cuda:
            return self.cupy.asarray(host)

    def synchronize(self) -> None:
        """Wait for every launch on this device."""
        self.cuda.synchronize()


_DEVICES: dict[int, CudaDevice] = {}
_DEVICES_LOCK = threading.Lock()


def get_device(index: int | None = None) -> CudaDevice:
    """``cuda:index`` (by default the one of :func:`edgecnn.devices.active_device`, else 0), opened once."""
    if index is None:
        spec = active_device()
        index = spec.index if spec.kind == "cuda" and spec.index is not None else 0
    found = _DEVICES.get(index)
    if found is not None:
        return found
    with _DEVICES_LOCK:
        found = _DEVICES.get(index)
        if found is None:
            cupy = import_cupy()
            try:
                count = int(cupy.cuda.runtime.getDeviceCount())
            except Exception as exc:  # CUDARuntimeError without a driver or GPU
                raise DeviceError(f"no CUDA device is usable here: {exc}") from None
            if not 0 <= index < count:
                raise DeviceError(f"no device cuda:{index}; this machine has {count} CUDA GPU(s)")
            found = _DEVICES[index] = CudaDevice(index, cupy)
    return found
