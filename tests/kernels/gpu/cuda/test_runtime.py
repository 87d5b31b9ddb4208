"""CUDA-only runtime behaviour on a GPU: cuda:0 listed with its memory and cores, CuPy arrays used in
place (copied only when not contiguous float32) and copied home, and the NVML energy meter for
cuda:N. What the CUDA and OpenCL runtimes share is in tests/kernels/gpu/backends/test_runtime.py."""

from __future__ import annotations

import numpy as np
import pytest

from edgecnn.devices import find_device, list_devices, to_host
from edgecnn.errors import DeviceError
from edgecnn.kernels.cuda import get_device
from edgecnn.kernels.cuda.array import to_device
from kernels.gpu.backends.support import rand
from kernels.gpu.cuda import support  # noqa: F401  (skips without CuPy or a CUDA GPU)

cupy = pytest.importorskip("cupy")


def test_listed_and_found() -> None:
    names = [d.name for d in list_devices()]
    assert "cuda:0" in names
    info = find_device("cuda:0")
    assert info.kind == "cuda" and info.memory_bytes > 0 and info.compute_units > 0


def test_cupy_arrays_are_used_in_place_and_copied_home() -> None:
    device = get_device(0)
    x = rand(np.random.default_rng(2), 4, 6)
    on_gpu = cupy.asarray(x)
    wrapped = to_device(device, on_gpu)
    assert wrapped.array is on_gpu
    assert to_device(device, on_gpu.T).shape == (6, 4)  # not contiguous: copied
    assert to_device(device, cupy.asarray(x, dtype=cupy.float64)).array.dtype == np.float32
    host = to_host(on_gpu)
    assert isinstance(host, np.ndarray) and np.array_equal(host, x)


def test_energy_on_cuda_uses_nvml() -> None:
    from edgecnn.energy import open_meter

    try:
        meter = open_meter("auto", "cuda:0")
    except DeviceError as exc:  # a driver without NVML's energy counter (pre-Volta)
        pytest.skip(str(exc))
    assert meter.name == "nvml" and meter.measured
    assert meter.energy_j() >= 0.0
