"""A backend's runtime, the same on OpenCL and CUDA: one device object per index, kernels built once,
the device array type, steps on host or device arrays, the model's own device winning, and a
missing Python package reported with the pip command that installs it."""

from __future__ import annotations

import importlib
import sys

import numpy as np
import pytest

from edgecnn.devices import cuda_device_infos, opencl_devices, to_host, using_device
from edgecnn.errors import DeviceError
from edgecnn.ops.registry import NoAttrs
from kernels.gpu.backends.support import Backend, one_node_graph, rand


def test_devices_and_kernels_are_opened_once(device: Backend) -> None:
    opened = device.device()
    assert device.kernels.get_device(0) is opened and device.kernels.get_device() is opened
    kernel = device.pick(opencl="act_relu", cuda="activation")
    assert opened.kernel(kernel) is opened.kernel(kernel)
    assert opened.name == device.name


def test_unknown_device_index_is_a_device_error(device: Backend) -> None:
    listing = device.pick(opencl=r"; OpenCL devices here: opencl:0 \(", cuda="")
    with pytest.raises(DeviceError, match=rf"no device {device.kind}:99{listing}"):
        device.kernels.get_device(99)


@pytest.mark.parametrize(("kind", "package"), [("opencl", "pyopencl"), ("cuda", "cupy")])
def test_missing_package_says_how_to_install_it(
    kind: str, package: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Needs neither the package nor a device: with the package hidden, opening a device fails with
    the pip command and no device of that kind is listed."""
    runtime = importlib.import_module(f"edgecnn.kernels.{kind}.runtime")
    monkeypatch.setattr(runtime, "_DEVICES", {})
    monkeypatch.setitem(sys.modules, package, None)
    with pytest.raises(DeviceError, match=rf"pip install 'edgecnn\[{kind}\]'"):
        runtime.get_device(0)
    assert (opencl_devices() if kind == "opencl" else cuda_device_infos()) == []


def test_plans_prepare_for_the_model_device(device: Backend) -> None:
    x = rand(np.random.default_rng(0), 2, 3)
    graph, feeds = one_node_graph("Relu", NoAttrs(), [x], ())
    (step,) = device.model(graph).plan_for(feeds).steps  # "<kind>" means device 0
    assert step.kernel.run.device is device.device()  # type: ignore[attr-defined]
    with using_device(f"{device.kind}:7"):  # the model's own device wins over an outer context
        (step,) = device.model(graph).plan_for(feeds).steps
    assert step.kernel.run.device is device.device()  # type: ignore[attr-defined]


def test_device_array_round_trip_and_views(device: Backend) -> None:
    opened = device.device()
    array_type = device.array_type
    to_device = importlib.import_module(f"{device.kernels.__name__}.array").to_device
    x = rand(np.random.default_rng(1), 3, 4, 5)
    d = array_type.upload(opened, x)
    assert (d.shape, d.size, d.ndim, d.nbytes) == ((3, 4, 5), 60, 3, 240)
    np.testing.assert_array_equal(d.get(), x)
    np.testing.assert_array_equal(np.asarray(d), x)
    view = d.reshape((12, 5))
    assert storage(device, view) == storage(device, d) and np.array_equal(view.get(), x.reshape(12, 5))
    with pytest.raises(ValueError, match="cannot reshape"):
        d.reshape((7,))
    assert to_device(opened, d) is d and to_host(d).shape == (3, 4, 5) and to_host(x) is x
    assert array_type.upload(opened, np.zeros((0, 3), np.float32)).get().shape == (0, 3)
    assert repr(d) == f"{array_type.__name__}({device.name}, float32[3, 4, 5])"


def storage(device: Backend, array: object) -> object:
    """What a view shares with its base: the OpenCL buffer, or the CUDA memory address."""
    return array.buffer if device.kind == "opencl" else array.array.data.ptr  # type: ignore[attr-defined]


def test_steps_run_on_host_arrays_or_device_arrays(device: Backend) -> None:
    x = rand(np.random.default_rng(2), 5, 70)
    graph, feeds = one_node_graph("Relu", NoAttrs(), [x], ())
    (step,) = device.model(graph).plan_for(feeds).steps
    on_host = step.kernel.run(x)
    on_device = step.kernel.run.run_device(device.array_type.upload(device.device(), x))  # type: ignore[attr-defined]
    assert isinstance(on_host, np.ndarray) and isinstance(on_device, device.array_type)
    np.testing.assert_array_equal(on_host, np.maximum(x, 0))
    np.testing.assert_array_equal(on_device.get(), np.maximum(x, 0))
