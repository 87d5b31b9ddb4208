"""The OpenCL runtime: one context/program per device, DeviceArray, steps, device selection."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from edgecnn.devices import using_device
from edgecnn.errors import DeviceError
from edgecnn.kernels.opencl import DeviceArray, get_device, runtime
from edgecnn.kernels.opencl.array import to_device, to_host
from edgecnn.ops.registry import NoAttrs
from edgecnn.runtime.options import RuntimeOptions
from opencl.support import one_node_graph, opencl_model, rand


def test_devices_and_kernels_are_opened_once() -> None:
    device = get_device(0)
    assert get_device(0) is device and get_device() is device
    assert device.kernel("act_relu") is device.kernel("act_relu")
    assert device.name == "opencl:0"


def test_unknown_device_index_is_a_device_error() -> None:
    with pytest.raises(DeviceError, match=r"no device opencl:99; OpenCL devices here: opencl:0 \("):
        get_device(99)


def test_missing_pyopencl_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime, "_DEVICES", {})
    monkeypatch.setitem(sys.modules, "pyopencl", None)
    with pytest.raises(DeviceError, match=r"pip install 'edgecnn\[opencl\]'"):
        get_device(0)


def test_plans_prepare_for_the_active_device() -> None:
    x = rand(np.random.default_rng(0), 2, 3)
    graph, feeds = one_node_graph("Relu", NoAttrs(), [x], ())
    (step,) = opencl_model(graph).plan_for(feeds).steps  # "opencl" means opencl:0
    assert step.kernel.run.device is get_device(0)  # type: ignore[attr-defined]
    with using_device("opencl:7"):  # the model's own device wins over an outer context
        (step,) = opencl_model(graph).plan_for(feeds).steps
    assert step.kernel.run.device is get_device(0)  # type: ignore[attr-defined]
    with pytest.raises(DeviceError, match="no device opencl:7"):
        RuntimeOptions.resolve(device="opencl:7")


def test_gemm_tile_fits_the_device_limits() -> None:
    assert runtime.gemm_tile(1024, 48 * 1024) == (16, 4)
    assert runtime.gemm_tile(32, 48 * 1024) == (8, 2)
    assert runtime.gemm_tile(1024, 1024) == (8, 2)
    assert runtime.gemm_tile(1024, 512) == (4, 1)


def test_device_array_round_trip_and_views() -> None:
    device = get_device(0)
    x = rand(np.random.default_rng(1), 3, 4, 5)
    d = DeviceArray.upload(device, x)
    assert (d.shape, d.size, d.ndim, d.nbytes) == ((3, 4, 5), 60, 3, 240)
    np.testing.assert_array_equal(d.get(), x)
    np.testing.assert_array_equal(np.asarray(d), x)
    view = d.reshape((12, 5))
    assert view.buffer is d.buffer and np.array_equal(view.get(), x.reshape(12, 5))
    with pytest.raises(ValueError, match="cannot reshape"):
        d.reshape((7,))
    assert to_device(device, d) is d and to_host(d).shape == (3, 4, 5) and to_host(x) is x
    assert DeviceArray.upload(device, np.zeros((0, 3), np.float32)).get().shape == (0, 3)
    assert repr(d) == "DeviceArray(opencl:0, float32[3, 4, 5])"


def test_steps_run_on_host_arrays_or_device_arrays() -> None:
    x = rand(np.random.default_rng(2), 5, 70)
    graph, feeds = one_node_graph("Relu", NoAttrs(), [x], ())
    (step,) = opencl_model(graph).plan_for(feeds).steps
    on_host = step.kernel.run(x)
    on_device = step.kernel.run.run_device(DeviceArray.upload(get_device(0), x))  # type: ignore[attr-defined]
    assert isinstance(on_host, np.ndarray) and isinstance(on_device, DeviceArray)
    np.testing.assert_array_equal(on_host, np.maximum(x, 0))
    np.testing.assert_array_equal(on_device.get(), np.maximum(x, 0))


def test_oversized_tensors_are_refused() -> None:
    with pytest.raises(DeviceError, match="exceeds 2\\*\\*31 - 1 elements"):
        DeviceArray.empty(get_device(0), (2**16, 2**16))
