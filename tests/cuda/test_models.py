"""Whole models on CUDA equal the CPU: every benchmark-zoo model (small variants), the bundled face
classifier and a Caffe LeNet, with activations resident on the GPU, with a host (reference) step in
the chain, and from several threads at once."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest

import edgecnn
from cuda.support import cuda_model
from edgecnn.bench.zoo import MODELS, build_model
from edgecnn.importers.caffe import load_caffe
from edgecnn.kernels.cuda import CudaArray
from edgecnn.kernels.registry import select_kernel
from edgecnn.model import Model
from edgecnn.runtime.executor import execute
from edgecnn.runtime.options import RuntimeOptions
from edgecnn.runtime.plan import Step

FIXTURES = Path(__file__).parents[1] / "fixtures"
LARGER = ("alexnet", "googlenet", "tiny-yolo", "vgg16")  # need a 64-pixel input to keep their shapes


def assert_close_to(actual: np.ndarray, expected: np.ndarray) -> None:
    """1e-4 relative to the output's scale."""
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-4 * float(np.abs(expected).max()))


class DeviceOutputs:
    """Hook recording, per step, whether its outputs stayed on the GPU."""

    def __init__(self) -> None:
        self.resident: list[tuple[str, bool]] = []

    def before(self, step: Step) -> None:
        pass

    def after(self, step: Step, outputs: tuple[object, ...]) -> None:
        self.resident.append((step.node.op, all(isinstance(o, CudaArray) for o in outputs)))


def zoo_case(name: str, tmp_path: Path) -> tuple[Model, Model, np.ndarray]:
    path = tmp_path / f"{name}.onnx"
    resolution = 64 if name in LARGER else None if name in ("lenet5", "simplecnn") else 32
    onnx.save(build_model(name, width=0.25, resolution=resolution), str(path))
    cpu = edgecnn.load(path, threads=1)
    spec = cpu.inputs[0]
    shape = tuple(d if isinstance(d, int) else 2 for d in spec.shape)  # type: ignore[union-attr]
    x = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
    return cpu, cuda_model(cpu.graph), x


@pytest.mark.parametrize("name", sorted(MODELS))
def test_zoo_model_on_cuda_equals_cpu_with_resident_activations(name: str, tmp_path: Path) -> None:
    cpu, model, x = zoo_case(name, tmp_path)
    plan = model.plan_for(x)
    fallbacks = [s.node.op for s in plan.steps if not s.kernel.name.startswith("cuda_")]
    assert not fallbacks, fallbacks
    expected = cpu(x)
    hook = DeviceOutputs()
    result = execute(plan, {model.inputs[0].name: x}, list(model.graph.outputs), (hook,))
    assert_close_to(result[model.graph.outputs[0]], expected)  # type: ignore[arg-type]
    assert all(on_device for _, on_device in hook.resident), hook.resident
    assert_close_to(model(x), expected)  # type: ignore[arg-type]


def lenet_model() -> tuple[Model, Model, np.ndarray]:
    graph = load_caffe(str(FIXTURES / "caffe" / "lenet.deploy.prototxt"), random_seed=0)
    cpu = Model(graph, RuntimeOptions.resolve(threads=1, device="cpu"))
    x = np.random.default_rng(0).standard_normal((3, 1, 28, 28), dtype=np.float32)
    return cpu, cuda_model(graph), x


def test_caffe_lenet_equals_cpu() -> None:
    cpu, model, x = lenet_model()
    assert all(s.kernel.name.startswith("cuda_") for s in model.plan_for(x).steps)
    assert_close_to(model(x), cpu(x))  # type: ignore[arg-type]


def test_run_with_a_host_step_in_the_chain_copies_across() -> None:
    """A step left to the reference kernel gets host arrays and its successors upload again."""
    cpu, model, x = lenet_model()
    plan = model.plan_for(x)
    steps = list(plan.steps)
    middle = len(steps) // 2
    step = steps[middle]
    in_types = [plan.types.get(n) if n else None for n in step.node.inputs]
    in_values = [plan.constants.get(n) if n else None for n in step.node.inputs]
    steps[middle] = replace(step, kernel=select_kernel(step.node, in_types, in_values, backend="reference"))
    mixed = replace(plan, steps=tuple(steps))
    result = execute(mixed, {model.inputs[0].name: x}, list(model.graph.outputs))
    assert_close_to(result[model.graph.outputs[0]], cpu(x))  # type: ignore[arg-type]


def test_concurrent_runs_share_the_gpu_safely() -> None:
    cpu, model, x = lenet_model()
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


def test_load_on_cuda_and_profile_per_layer(tmp_path: Path) -> None:
    """edgecnn.load(..., device="cuda:0") runs the model there; profiling waits for each step."""
    path = tmp_path / "lenet5.onnx"
    onnx.save(build_model("lenet5"), str(path))
    model = edgecnn.load(path, device="cuda:0")
    x = np.random.default_rng(1).standard_normal((1, 1, 28, 28), dtype=np.float32)
    assert_close_to(model(x), edgecnn.load(path, threads=1)(x))  # type: ignore[arg-type]
    profile = model.profile({model.inputs[0].name: x}, iterations=2, warmup=1)
    assert len(profile.iteration_ms) == 2 and profile.layers
    assert all(layer.kernel.startswith("cuda_") and layer.min_ms > 0 for layer in profile.layers)
