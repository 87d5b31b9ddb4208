"""CudaArray: a float32 tensor in a CUDA GPU's memory (a CuPy array), so activations stay on the GPU
between consecutive CUDA steps; ``np.asarray(a)`` and :func:`edgecnn.devices.to_host` copy it back."""

from __future__ import annotations

from typing import Any

import numpy as np

from edgecnn.devices import DeviceTensor, is_cupy_array, to_host
from edgecnn.kernels.cuda.runtime import CudaDevice

__all__ = ["CudaArray", "to_device", "to_host"]


class CudaArray(DeviceTensor):
    """A C-contiguous float32 CuPy array on one device; reshaping shares the memory."""

    __slots__ = ("array", "device")

    def __init__(self, device: CudaDevice, array: Any) -> None:
        self.device = device
        self.array = array

    @classmethod
    def empty(cls, device: CudaDevice, shape: tuple[int, ...]) -> CudaArray:
        return cls(device, device.empty(tuple(int(d) for d in shape)))

    @classmethod
    def upload(cls, device: CudaDevice, array: np.ndarray) -> CudaArray:
        """Copy a host array to the device (as float32)."""
        return cls(device, device.upload(array))

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.array.shape)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.float32)

    @property
    def size(self) -> int:
        return int(self.array.size)

    @property
    def ndim(self) -> int:
        return int(self.array.ndim)

    @property
    def nbytes(self) -> int:
        return int(self.array.nbytes)

    def reshape(self, shape: tuple[int, ...]) -> CudaArray:
        """The same memory seen with another shape of the same size."""
        if int(np.prod(shape, dtype=np.int64)) != self.size:
            raise ValueError(f"cannot reshape a device tensor of shape {list(self.shape)} to {list(shape)}")
        return CudaArray(self.device, self.array.reshape(tuple(int(d) for d in shape)))

    def get(self) -> np.ndarray:
        """Copy to a new host array (waits for the kernels that write it)."""
        with self.device.cuda:
            return np.asarray(self.array.get(), dtype=np.float32)

    def wait(self) -> None:
        self.device.synchronize()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        host = self.get()
        return host if dtype is None else host.astype(dtype, copy=False)

    def __repr__(self) -> str:
        return f"CudaArray({self.device.name}, float32{list(self.shape)})"


def to_device(device: CudaDevice, value: Any) -> CudaArray:
    """``value`` on ``device``: a CudaArray already there as is, a float32 C-contiguous CuPy array
    there wrapped without a copy, anything else copied."""
    if isinstance(value, CudaArray):
        if value.device is device:
            return value
        value = value.get()
    elif is_cupy_array(value):
        if int(value.device.id) == device.index and value.dtype == np.float32 and value.flags.c_contiguous:
            return CudaArray(device, value)
        with device.cuda:
            return CudaArray(device, device.cupy.array(value, dtype=device.cupy.float32, order="C"))
    return CudaArray.upload(device, np.asarray(value))
