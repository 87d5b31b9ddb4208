"""Whole models on OpenCL equal the CPU: the bundled face classifier and a Caffe LeNet, with
activations resident on the device, and with a host (reference) step in the chain."""

from __future__ import annotations

import threading
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

import edgecnn
from edgecnn.importers.caffe import load_caffe
from edgecnn.ir.graph import Graph
from edgecnn.kernels.opencl import DeviceArray
from edgecnn.model import Model
from edgecnn.runtime.executor import execute
from edgecnn.runtime.options import RuntimeOptions
from edgecnn.runtime.plan import Step
from opencl.support import opencl_model

FIXTURES = Path(__file__).parents[1] / "fixtures"


def face_graph() -> Graph:
    return edgecnn.load(str(resources.files("edgecnn") / "data" / "simplecnn" / "face_binary_cls.onnx")).graph


def lenet_graph() -> Graph:
    return load_caffe(str(FIXTURES / "caffe" / "lenet.deploy.prototxt"), random_seed=0)


MODELS = {"face": (face_graph, (1, 3, 128, 128)), "lenet": (lenet_graph, (3, 1, 28, 28))}


def assert_close_to(actual: np.ndarray, expected: np.ndarray) -> None:
    """1e-4 relative to the output's scale."""
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-4 * float(np.abs(expected).max()))


class DeviceOutputs:
    """Hook recording, per step, whether its outputs stayed on the device."""

    def __init__(self) -> None:
        self.resident: list[tuple[str, bool]] = []

    def before(self, step: Step) -> None:
        pass

    def after(self, step: Step, outputs: tuple[object, ...]) -> None:
        self.resident.append((step.node.op, all(isinstance(o, DeviceArray) for o in outputs)))


@pytest.fixture(scope="module", params=sorted(MODELS))
def case(request: pytest.FixtureRequest) -> tuple[Model, Model, np.ndarray]:
    build, shape = MODELS[request.param]
    graph = build()
    cpu = Model(graph, RuntimeOptions.resolve(threads=1, device="cpu"))
    x = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
    return cpu, opencl_model(graph), x


def test_every_step_runs_an_opencl_kernel(case: tuple[Model, Model, np.ndarray]) -> None:
    _, model, x = case
    kernels = [step.kernel.name for step in model.plan_for(x).steps]
    assert kernels and all(k.startswith("opencl_") for k in kernels), kernels


def test_model_equals_cpu_with_resident_activations(case: tuple[Model, Model, np.ndarray]) -> None:
    cpu, model, x = case
    plan = model.plan_for(x)
    hook = DeviceOutputs()
    name = model.inputs[0].name
    result = execute(plan, {name: x}, list(model.graph.outputs), (hook,))
    assert_close_to(result[model.graph.outputs[0]], cpu(x))  # type: ignore[arg-type]
    assert all(on_device for _, on_device in hook.resident), hook.resident


def test_resident_run_copies_for_steps_without_opencl_kernels(case: tuple[Model, Model, np.ndarray]) -> None:
    """A step left to the reference kernel gets host arrays and its successors upload again."""
    cpu, model, x = case
    plan = model.plan_for(x)
    steps = list(plan.steps)
    # Replace the first step's kernel by the reference: a host step at the start of the chain.
    from dataclasses import replace

    from edgecnn.kernels.registry import select_kernel

    first = steps[0]
    in_types = [plan.types.get(n) if n else None for n in first.node.inputs]
    in_values = [plan.constants.get(n) if n else None for n in first.node.inputs]
    steps[0] = replace(first, kernel=select_kernel(first.node, in_types, in_values, backend="reference"))
    mixed = replace(plan, steps=tuple(steps))
    result = execute(mixed, {model.inputs[0].name: x}, list(model.graph.outputs))
    assert_close_to(result[model.graph.outputs[0]], cpu(x))  # type: ignore[arg-type]


def test_concurrent_runs_share_the_device_safely(case: tuple[Model, Model, np.ndarray]) -> None:
    cpu, model, x = case
    expected = cpu(x)
    inputs = [x + np.float32(i) for i in range(4)]
    wanted = [cpu(v) for v in inputs]
    results: dict[int, np.ndarray] = {}

    def work(i: int) -> None:
        results[i] = model(inputs[i])  # type: ignore[assignment]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(4):
        assert_close_to(results[i], wanted[i])
    assert expected.shape == results[0].shape
