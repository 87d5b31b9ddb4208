"""Device names and discovery: parse_device, find_device, list_devices (OpenCL and a stand-in CuPy)."""

from __future__ import annotations

import sys
import types

import pytest

from edgecnn import devices
from edgecnn.devices import DeviceSpec, find_device, list_devices, parse_device, using_device
from edgecnn.errors import DeviceError


@pytest.mark.parametrize(
    ("text", "kind", "index", "name"),
    [
        ("cpu", "cpu", None, "cpu"),
        ("reference", "reference", None, "reference"),
        ("opencl", "opencl", 0, "opencl:0"),
        ("opencl:3", "opencl", 3, "opencl:3"),
        (" OpenCL:1 ", "opencl", 1, "opencl:1"),
        ("cuda", "cuda", 0, "cuda:0"),
        ("cuda:12", "cuda", 12, "cuda:12"),
    ],
)
def test_parse_device_names(text: str, kind: str, index: int | None, name: str) -> None:
    spec = parse_device(text)
    assert (spec.kind, spec.index, spec.name, str(spec)) == (kind, index, name, name)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gpu", "unknown device 'gpu'"),
        ("", "unknown device"),
        ("cpu:0", "'cpu' takes no index"),
        ("reference:1", "takes no index"),
        ("opencl:", "must be a number"),
        ("opencl:-1", "must be a number"),
        ("opencl:one", "must be a number"),
        ("opencl:0:1", "must be a number"),
    ],
)
def test_parse_device_rejects_bad_names(text: str, message: str) -> None:
    with pytest.raises(DeviceError, match=message):
        parse_device(text)


def test_parse_device_rejects_non_strings() -> None:
    with pytest.raises(DeviceError, match="must be a string"):
        parse_device(0)  # type: ignore[arg-type]


def test_using_device_sets_and_restores_the_active_device() -> None:
    assert devices.active_device() == DeviceSpec("cpu")
    with using_device("opencl:2") as spec:
        assert devices.active_device() == spec == DeviceSpec("opencl", 2)
        with using_device(DeviceSpec("cuda", 0)):
            assert devices.active_device().name == "cuda:0"
        assert devices.active_device().name == "opencl:2"
    assert devices.active_device() == DeviceSpec("cpu")


def test_cpu_is_listed_first_with_its_cores_and_memory() -> None:
    cpu = list_devices()[0]
    assert (cpu.name, cpu.kind, cpu.index, cpu.device_type) == ("cpu", "cpu", None, "CPU")
    assert cpu.compute_units >= 1 and cpu.memory_bytes > 0 and cpu.label
    assert find_device("cpu") == cpu and find_device("reference") == cpu


def test_opencl_devices_are_numbered_over_all_platforms() -> None:
    cl = pytest.importorskip("pyopencl")
    try:
        expected = [d for p in cl.get_platforms() for d in p.get_devices()]
    except cl.Error:
        expected = []
    listed = [d for d in list_devices() if d.kind == "opencl"]
    assert [d.name for d in listed] == [f"opencl:{i}" for i in range(len(expected))]
    for info, dev in zip(listed, expected):
        assert info.label == dev.name.strip() and info.compute_units == dev.max_compute_units
        assert info.memory_bytes == dev.global_mem_size and info.platform == dev.platform.name.strip()
        assert find_device(info.name) == info
    with pytest.raises(DeviceError, match=f"no device opencl:{len(expected)} on this machine"):
        find_device(f"opencl:{len(expected)}")


def test_without_pyopencl_no_opencl_device_is_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyopencl", None)  # import fails
    assert devices.opencl_devices() == []
    assert [d.kind for d in list_devices() if d.kind == "opencl"] == []
    with pytest.raises(DeviceError, match="opencl devices here: none"):
        find_device("opencl:0")


def _fake_cupy(count: int) -> types.ModuleType:
    """Just the part of CuPy's API that device discovery reads."""
    runtime = types.SimpleNamespace(
        getDeviceCount=lambda: count,
        runtimeGetVersion=lambda: 12040,
        getDeviceProperties=lambda i: {
            "name": f"Fake GPU {i}".encode(),
            "multiProcessorCount": 132,
            "totalGlobalMem": 80 * 2**30,
            "major": 9,
            "minor": 0,
        },
    )
    module = types.ModuleType("cupy")
    module.cuda = types.SimpleNamespace(runtime=runtime)  # type: ignore[attr-defined]
    return module


def test_cuda_gpus_are_listed_through_cupy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(2))
    gpus = [d for d in list_devices() if d.kind == "cuda"]
    assert [(d.name, d.label, d.compute_units) for d in gpus] == [
        ("cuda:0", "Fake GPU 0", 132),
        ("cuda:1", "Fake GPU 1", 132),
    ]
    assert gpus[0].platform == "CUDA runtime 12.4" and gpus[0].version == "compute 9.0"
    assert find_device("cuda:1").label == "Fake GPU 1"


def test_cuda_is_absent_without_cupy_or_without_a_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cupy", None)
    assert devices.cuda_device_infos() == []
    broken = _fake_cupy(1)

    def no_driver() -> int:
        raise RuntimeError("cudaErrorNoDevice")

    broken.cuda.runtime.getDeviceCount = no_driver  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cupy", broken)
    assert devices.cuda_device_infos() == []


def test_to_host_copies_device_tensors_only() -> None:
    import numpy as np

    from edgecnn.devices import DeviceTensor, to_host

    class Fake(DeviceTensor):
        def get(self) -> np.ndarray:
            return np.ones(2)

    host = np.zeros(3)
    assert to_host(host) is host and to_host(None) is None
    assert to_host(Fake()).tolist() == [1.0, 1.0]
    with pytest.raises(NotImplementedError):
        DeviceTensor().get()
