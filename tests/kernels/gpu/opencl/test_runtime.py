"""OpenCL-only runtime rules: GEMM tiles sized to the device's limits, the 2**31 - 1 element cap of
OpenCL buffers, and resolving a device index that does not exist. What the OpenCL and CUDA runtimes
share is in tests/kernels/gpu/backends/test_runtime.py."""

from __future__ import annotations

import pytest

from edgecnn.errors import DeviceError
from edgecnn.kernels.opencl import DeviceArray, get_device, runtime
from edgecnn.runtime.options import RuntimeOptions
from kernels.gpu.opencl import support  # noqa: F401  (skips without pyopencl or an OpenCL device)


def test_gemm_tile_fits_the_device_limits() -> None:
    assert runtime.gemm_tile(1024, 48 * 1024) == (16, 4)
    assert runtime.gemm_tile(32, 48 * 1024) == (8, 2)
    assert runtime.gemm_tile(1024, 1024) == (8, 2)
    assert runtime.gemm_tile(1024, 512) == (4, 1)


def test_oversized_tensors_are_refused() -> None:
    with pytest.raises(DeviceError, match="exceeds 2\\*\\*31 - 1 elements"):
        DeviceArray.empty(get_device(0), (2**16, 2**16))


def test_resolving_a_missing_device_index_fails() -> None:
    with pytest.raises(DeviceError, match="no device opencl:7"):
        RuntimeOptions.resolve(device="opencl:7")
