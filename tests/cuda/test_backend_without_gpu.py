"""What holds for the CUDA backend on any machine, GPU or not: the package imports without CuPy,
a missing CuPy is a DeviceError that says how to install it, to_host copies CuPy arrays, and CUDA
devices are listed only when CuPy finds a GPU."""

from __future__ import annotations

import subprocess
import sys
import types

import numpy as np
import pytest

from edgecnn import devices
from edgecnn.errors import DeviceError
from edgecnn.kernels.cuda import runtime


def test_importing_the_backend_does_not_import_cupy() -> None:
    code = "import sys, edgecnn.kernels.cuda, edgecnn.kernels.cpu; sys.exit('cupy' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_missing_cupy_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime, "_DEVICES", {})
    monkeypatch.setitem(sys.modules, "cupy", None)
    with pytest.raises(DeviceError, match=r"pip install 'edgecnn\[cuda\]'"):
        runtime.get_device(0)
    assert devices.cuda_device_infos() == []


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
    from edgecnn.energy import meters

    class FakeNvml:
        name = "nvml"

    monkeypatch.setitem(meters.METERS, "nvml", FakeNvml)
    assert isinstance(meters.open_meter("auto", "cuda:0"), FakeNvml)
