"""Small variants of benchmark-zoo models on OpenCL: every step an OpenCL kernel, outputs equal to
the CPU's (depthwise convs, ReLU6 clips, residual adds, Concat, Split, channel shuffles)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import edgecnn
from edgecnn.bench.zoo import build_model
from edgecnn.runtime.executor import execute
from opencl.support import opencl_model


@pytest.mark.parametrize("name", ["mobilenetv2", "shufflenetv2", "googlenet", "resnet18", "tiny-yolo"])
def test_zoo_model_on_opencl_equals_cpu(name: str, tmp_path: object) -> None:
    path = f"{tmp_path}/{name}.onnx"
    onnx.save(
        build_model(name, width=0.25, resolution=64 if name in ("googlenet", "tiny-yolo") else 32), path
    )
    cpu = edgecnn.load(path, threads=1)
    model = opencl_model(cpu.graph)
    spec = cpu.inputs[0]
    x = np.random.default_rng(0).standard_normal(
        tuple(d if isinstance(d, int) else 1 for d in spec.shape),  # type: ignore[union-attr]
        dtype=np.float32,
    )
    plan = model.plan_for(x)
    fallbacks = [s.node.op for s in plan.steps if not s.kernel.name.startswith("opencl_")]
    assert not fallbacks, fallbacks
    expected = cpu(x)
    scale = float(np.abs(expected).max())
    for actual in (
        model(x),
        execute(plan, {spec.name: x}, list(cpu.graph.outputs))[cpu.graph.outputs[0]],
    ):
        np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-4 * scale)  # type: ignore[arg-type]
