"""DeviceArray: a float32 tensor in an OpenCL buffer, so activations can stay on the device
between consecutive OpenCL steps. ``np.asarray(a)`` copies it to the host."""

from __future__ import annotations

from typing import Any

import numpy as np

from edgecnn.devices import DeviceTensor, to_host
from edgecnn.errors import DeviceError
from edgecnn.kernels.gpu.step import MAX_ELEMENTS
from edgecnn.kernels.opencl.runtime import OpenCLDevice

__all__ = ["DeviceArray", "to_device", "to_host"]


class DeviceArray(DeviceTensor):
    """A C-contiguous float32 tensor on one OpenCL device; reshaping shares the buffer."""

    __slots__ = ("buffer", "device", "dtype", "shape")

    def __init__(self, device: OpenCLDevice, buffer: Any, shape: tuple[int, ...]) -> None:
        self.device = device
        self.buffer = buffer
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(np.float32)

    @classmethod
    def empty(cls, device: OpenCLDevice, shape: tuple[int, ...]) -> DeviceArray:
        size = int(np.prod(shape, dtype=np.int64))
        if size > MAX_ELEMENTS:
            raise DeviceError(f"{device.name}: a tensor of shape {list(shape)} exceeds 2**31 - 1 elements")
        return cls(device, device.allocate(size * 4), shape)

    @classmethod
    def upload(cls, device: OpenCLDevice, array: np.ndarray) -> DeviceArray:
        """Copy a host array to the device (as float32)."""
        import pyopencl as cl

        host = np.ascontiguousarray(array, dtype=np.float32)
        result = cls.empty(device, host.shape)
        if host.size:
            cl.enqueue_copy(device.queue, result.buffer, host, is_blocking=False)
        return result

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * 4

    def reshape(self, shape: tuple[int, ...]) -> DeviceArray:
        """The same buffer seen with another shape of the same size."""
        if int(np.prod(shape, dtype=np.int64)) != self.size:
            raise ValueError(f"cannot reshape a device tensor of shape {list(self.shape)} to {list(shape)}")
        return DeviceArray(self.device, self.buffer, shape)

    def get(self) -> np.ndarray:
        """Copy to a new host array (waits for the kernels that write it)."""
        import pyopencl as cl

        out = np.empty(self.shape, np.float32)
        if out.size:
            cl.enqueue_copy(self.device.queue, out, self.buffer, is_blocking=True)
        return out

    def wait(self) -> None:
        self.device.finish()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        host = self.get()
        return host if dtype is None else host.astype(dtype, copy=False)

    def __repr__(self) -> str:
        return f"DeviceArray({self.device.name}, float32{list(self.shape)})"


def to_device(device: OpenCLDevice, value: Any) -> DeviceArray:
    """``value`` on ``device``: a DeviceArray already there as is, anything else copied."""
    if isinstance(value, DeviceArray):
        if value.device is device:
            return value
        value = value.get()
    return DeviceArray.upload(device, np.asarray(value))
