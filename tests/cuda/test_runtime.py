"""The CUDA runtime on a GPU: one device object per index, CudaArray, to_device / to_host with CuPy
arrays, steps on host or device arrays, device listing and the energy meter chosen for cuda:N."""

from __future__ import annotations

import numpy as np
import pytest

from cuda.support import cuda_model, one_node_graph, rand
from edgecnn.devices import find_device, list_devices, to_host, using_device
from edgecnn.errors import DeviceError
from edgecnn.kernels.cuda import CudaArray, get_device
from edgecnn.kernels.cuda.array import to_device
from edgecnn.ops.registry import NoAttrs

cupy = pytest.importorskip("cupy")


def test_devices_and_kernels_are_opened_once() -> None:
    device = get_device(0)
    assert get_device(0) is device and get_device() is device
    assert device.kernel("activation") is device.kernel("activation")
    assert device.name == "cuda:0"


def test_unknown_device_index_is_a_device_error() -> None:
    with pytest.raises(DeviceError, match=r"no device cuda:99"):
        get_device(99)


def test_listed_and_found() -> None:
    names = [d.name for d in list_devices()]
    assert "cuda:0" in names
    info = find_device("cuda:0")
    assert info.kind == "cuda" and info.memory_bytes > 0 and info.compute_units > 0


def test_cuda_array_round_trip_and_views() -> None:
    device = get_device(0)
    x = rand(np.random.default_rng(1), 3, 4, 5)
    d = CudaArray.upload(device, x)
    assert (d.shape, d.size, d.ndim, d.nbytes) == ((3, 4, 5), 60, 3, 240)
    np.testing.assert_array_equal(d.get(), x)
    np.testing.assert_array_equal(np.asarray(d), x)
    view = d.reshape((12, 5))
    assert view.array.data.ptr == d.array.data.ptr and np.array_equal(view.get(), x.reshape(12, 5))
    with pytest.raises(ValueError, match="cannot reshape"):
        d.reshape((7,))
    assert to_device(device, d) is d and to_host(d).shape == (3, 4, 5) and to_host(x) is x
    assert CudaArray.upload(device, np.zeros((0, 3), np.float32)).get().shape == (0, 3)
    assert repr(d) == "CudaArray(cuda:0, float32[3, 4, 5])"


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


def test_steps_run_on_host_arrays_or_device_arrays() -> None:
    x = rand(np.random.default_rng(2), 5, 70)
    graph, feeds = one_node_graph("Relu", NoAttrs(), [x], ())
    (step,) = cuda_model(graph).plan_for(feeds).steps
    on_host = step.kernel.run(x)
    on_device = step.kernel.run.run_device(CudaArray.upload(get_device(0), x))  # type: ignore[attr-defined]
    assert isinstance(on_host, np.ndarray) and isinstance(on_device, CudaArray)
    np.testing.assert_array_equal(on_host, np.maximum(x, 0))
    np.testing.assert_array_equal(on_device.get(), np.maximum(x, 0))


def test_plans_prepare_for_the_model_device() -> None:
    x = rand(np.random.default_rng(0), 2, 3)
    graph, feeds = one_node_graph("Relu", NoAttrs(), [x], ())
    with using_device("cuda:7"):  # the model's own device wins over an outer context
        (step,) = cuda_model(graph).plan_for(feeds).steps
    assert step.kernel.run.device is get_device(0)  # type: ignore[attr-defined]


def test_energy_on_cuda_uses_nvml() -> None:
    from edgecnn.energy import open_meter

    try:
        meter = open_meter("auto", "cuda:0")
    except DeviceError as exc:  # a driver without NVML's energy counter (pre-Volta)
        pytest.skip(str(exc))
    assert meter.name == "nvml" and meter.measured
    assert meter.energy_j() >= 0.0
