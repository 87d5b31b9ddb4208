"""Whole models on every GPU-ish backend equal the CPU: the benchmark-zoo models (small variants), the
bundled face classifier and a Caffe LeNet, with activations resident on the device, with a host
(reference) step in the chain, from several threads at once, and loaded with edgecnn.load(device=)."""

from __future__ import annotations

import threading
from dataclasses import replace
from importlib import resources
from pathlib import Path

import numpy as np
import onnx
import pytest

import edgecnn
from edgecnn.bench.zoo import MODELS as ZOO
from edgecnn.bench.zoo import build_model
from edgecnn.importers.caffe import load_caffe
from edgecnn.ir.graph import Graph
from edgecnn.kernels.registry import select_kernel
from edgecnn.model import Model
from edgecnn.runtime.executor import execute
from edgecnn.runtime.options import RuntimeOptions
from edgecnn.runtime.plan import Step, plan_program
from kernels.gpu.backends.support import Backend, assert_close_to

FIXTURES = Path(__file__).parents[3] / "fixtures"
LARGER = ("alexnet", "googlenet", "tiny-yolo", "vgg16")  # need a 64-pixel input to keep their shapes


class DeviceOutputs:
    """Hook recording, per step, whether its outputs stayed on the device."""

    def __init__(self, array_type: type) -> None:
        self.array_type = array_type
        self.resident: list[tuple[str, bool]] = []

    def before(self, step: Step) -> None:
        pass

    def after(self, step: Step, outputs: tuple[object, ...]) -> None:
        self.resident.append((step.node.op, all(isinstance(o, self.array_type) for o in outputs)))


def assert_resident_run_equals(model: Model, x: np.ndarray, expected: np.ndarray, array_type: type) -> None:
    """A plain run and a hooked run equal ``expected``; every step's outputs stayed on the device."""
    hook = DeviceOutputs(array_type)
    result = execute(model.plan_for(x), {model.inputs[0].name: x}, (hook,))
    assert_close_to(result[model.graph.outputs[0]], expected)  # type: ignore[arg-type]
    assert all(on_device for _, on_device in hook.resident), hook.resident
    assert_close_to(model(x), expected)  # type: ignore[arg-type]


# OpenCL (PoCL here) runs five of them with one image per batch; CUDA runs every model with two.
OPENCL_ZOO = [(name, 1) for name in ("mobilenetv2", "shufflenetv2", "googlenet", "resnet18", "tiny-yolo")]
CUDA_ZOO = [(name, 2) for name in sorted(ZOO)]


@pytest.mark.per_backend("name, batch", opencl=OPENCL_ZOO, cuda=CUDA_ZOO)
def test_zoo_model_equals_cpu_with_resident_activations(
    device: Backend, name: str, batch: int, tmp_path: Path
) -> None:
    path = tmp_path / f"{name}.onnx"
    resolution = 64 if name in LARGER else None if name in ("lenet5", "simplecnn") else 32
    onnx.save(build_model(name, width=0.25, resolution=resolution), str(path))
    cpu = edgecnn.load(path, threads=1)
    shape = tuple(d if isinstance(d, int) else batch for d in cpu.inputs[0].shape)  # type: ignore[union-attr]
    x = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
    model = device.model(cpu.graph)
    fallbacks = [
        s.node.op for s in model.plan_for(x).steps if not s.kernel.name.startswith(f"{device.kind}_")
    ]
    assert not fallbacks, fallbacks
    assert_resident_run_equals(model, x, cpu(x), device.array_type)


def face_graph() -> Graph:
    return edgecnn.load(str(resources.files("edgecnn") / "data" / "simplecnn" / "face_binary_cls.onnx")).graph


def lenet_graph() -> Graph:
    return load_caffe(str(FIXTURES / "caffe" / "lenet.deploy.prototxt"), random_seed=0)


BUNDLED = {"face": (face_graph, (1, 3, 128, 128)), "lenet": (lenet_graph, (3, 1, 28, 28))}


@pytest.fixture(scope="module", params=sorted(BUNDLED))
def case(request: pytest.FixtureRequest, device: Backend) -> tuple[Model, Model, np.ndarray]:
    """(the model on the CPU, the same graph on the backend, an input)."""
    build, shape = BUNDLED[request.param]
    graph = build()
    cpu = Model(graph, RuntimeOptions.resolve(threads=1, device="cpu"))
    x = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
    return cpu, device.model(graph), x


def test_bundled_model_equals_cpu_with_resident_activations(
    device: Backend, case: tuple[Model, Model, np.ndarray]
) -> None:
    cpu, model, x = case
    kernels = [step.kernel.name for step in model.plan_for(x).steps]
    assert kernels and all(k.startswith(f"{device.kind}_") for k in kernels), kernels
    assert_resident_run_equals(model, x, cpu(x), device.array_type)


@pytest.mark.parametrize("where", ["first", "middle"])
def test_run_with_a_host_step_in_the_chain_copies_across(
    case: tuple[Model, Model, np.ndarray], where: str
) -> None:
    """A step left to the reference kernel gets host arrays and its successors upload again."""
    cpu, model, x = case
    plan = model.plan_for(x)
    steps = list(plan.steps)
    at = 0 if where == "first" else len(steps) // 2
    step = steps[at]
    in_types = [plan.types.get(n) if n else None for n in step.node.inputs]
    in_values = [plan.constants.get(n) if n else None for n in step.node.inputs]
    steps[at] = replace(step, kernel=select_kernel(step.node, in_types, in_values, backend="reference"))
    mixed = plan_program(replace(plan.program, steps=tuple(steps)), plan.wanted, plan.threads)
    result = execute(mixed, {model.inputs[0].name: x})
    assert_close_to(result[model.graph.outputs[0]], cpu(x))  # type: ignore[arg-type]


def test_concurrent_runs_share_the_device_safely(case: tuple[Model, Model, np.ndarray]) -> None:
    cpu, model, x = case
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


def test_load_on_the_device_and_profile_per_layer(device: Backend, tmp_path: Path) -> None:
    """edgecnn.load(..., device="<kind>:0") runs the model there; profiling waits for each step."""
    path = tmp_path / "lenet5.onnx"
    onnx.save(build_model("lenet5"), str(path))
    model = edgecnn.load(path, device=device.name)
    x = np.random.default_rng(1).standard_normal((1, 1, 28, 28), dtype=np.float32)
    assert_close_to(model(x), edgecnn.load(path, threads=1)(x))  # type: ignore[arg-type]
    profile = model.profile({model.inputs[0].name: x}, iterations=2, warmup=1)
    assert len(profile.iteration_ms) == 2 and profile.layers
    assert all(layer.kernel.startswith(f"{device.kind}_") and layer.min_ms > 0 for layer in profile.layers)
