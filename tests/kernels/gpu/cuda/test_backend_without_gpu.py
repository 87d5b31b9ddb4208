"""What holds for the CUDA backend on any machine, GPU or not: the package imports without CuPy,
to_host copies CuPy arrays, and the energy meter for cuda:N is NVML's. (A missing CuPy reported with
its pip command is tested with pyopencl's in tests/kernels/gpu/backends/test_runtime.py.)"""

from __future__ import annotations

import subprocess
import sys
import types

import numpy as np
import pytest

from edgecnn import devices


def test_importing_the_backend_does_not_import_cupy() -> None:
    code = "import sys, edgecnn.kernels.cuda, edgecnn.kernels.cpu; sys.exit('cupy' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


class FakeCupyArray:
    """Stands in for cupy.ndarray: ``get`` copies to the host."""

    def __init__(self, host: np.ndarray) -> None:
        self.host = host

    def get(self) -> np.ndarray:
        return self.host.copy()


def test_to_host_copies_cupy_arrays(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("cupy")
    fake.ndarray = FakeCupyArray  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cupy", fake)
    x = np.arange(6, dtype=np.float32)
    copied = devices.to_host(FakeCupyArray(x))
    assert isinstance(copied, np.ndarray) and np.array_equal(copied, x)
    assert devices.to_host(x) is x


def test_to_host_without_cupy_leaves_values_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    value = FakeCupyArray(np.zeros(2, np.float32))
    assert devices.to_host(value) is value and not devices.is_cupy_array(value)


def test_energy_for_cuda_devices_tries_nvml_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """ "auto" on cuda:N opens NVML for board N and nothing else (no CPU meter stands in for a GPU)."""
    from edgecnn.energy import meters

    class FakeNvml:
        name = "nvml"

        def __init__(self, index: int = 0) -> None:
            self.index = index

    monkeypatch.setattr(meters, "NvmlMeter", FakeNvml)
    meter = meters.open_meter("auto", "cuda:1")
    assert isinstance(meter, FakeNvml) and meter.index == 1
    assert meters.AUTO_ORDER["cuda"] == ("nvml",)
