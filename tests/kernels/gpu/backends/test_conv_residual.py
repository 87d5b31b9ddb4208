"""FusedConvAdd on every GPU-ish backend against the reference (GEMM and direct convolutions, every
activation, bias or none, a constant residual), and ResNet-18 with its residual tails fused running
with no host step and its activations resident on the device."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from edgecnn.bench.zoo import build_model
from edgecnn.importers import load_graph
from edgecnn.model import Model
from edgecnn.ops.fused import ACTIVATIONS, FusedConvAttrs
from edgecnn.runtime.options import RuntimeOptions
from edgecnn.testing import reference_run
from kernels.gpu.backends.support import Backend, assert_close_to, rand

CASES = [
    ((2, 6, 9, 9), (8, 6, 3, 3), FusedConvAttrs(pads=(1, 1, 1, 1))),
    ((1, 16, 7, 5), (24, 16, 1, 1), FusedConvAttrs()),  # 1x1: no im2col
    ((1, 8, 10, 10), (8, 1, 3, 3), FusedConvAttrs(group=8, pads=(1, 1, 1, 1))),  # the direct kernel
    ((1, 6, 11, 13), (4, 6, 3, 3), FusedConvAttrs(strides=(2, 2))),
]


@pytest.mark.parametrize("x_shape, w_shape, geometry", CASES)
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_fused_conv_add_matches_reference(
    device: Backend,
    x_shape: tuple[int, ...],
    w_shape: tuple[int, ...],
    geometry: FusedConvAttrs,
    activation: str,
) -> None:
    rng = np.random.default_rng(len(activation))
    x, w, b = rand(rng, *x_shape), rand(rng, *w_shape), rand(rng, w_shape[0])
    attrs = FusedConvAttrs(**{**geometry.__dict__, "activation": activation, "low": -0.5, "high": 0.7})
    out = reference_run("FusedConvAdd", attrs, [x, w, b, np.zeros((), np.float32)], (1, 2)).shape
    z = rand(rng, *out)
    taps = w_shape[1] * w_shape[2] * w_shape[3]
    device.check_node("FusedConvAdd", attrs, [x, w, b, z], (1, 2), kernel="conv_residual", magnitude=taps)
    device.check_node("FusedConvAdd", attrs, [x, w, None, z], (1, 3), kernel="conv_residual", magnitude=taps)


def test_resnet18_with_fused_residuals_runs_on_the_device(device: Backend, tmp_path: Path) -> None:
    path = tmp_path / "resnet18.onnx"
    onnx.save(build_model("resnet18", width=0.25, resolution=32), str(path))
    graph = load_graph(path)
    model = device.model(graph)
    assert [n.op for n in model.optimized_graph.nodes].count("FusedConvAdd") == 8
    x = np.random.default_rng(0).standard_normal((1, 3, 32, 32), dtype=np.float32)
    steps = model.plan_for(x).steps
    fallbacks = [s.node.op for s in steps if not s.kernel.name.startswith(f"{device.kind}_")]
    assert not fallbacks, fallbacks
    assert sum(s.kernel.name == device.kernel("conv_residual") for s in steps) == 8
    cpu = Model(graph, RuntimeOptions.resolve(threads=1, optimize=False))
    assert_close_to(model(x), cpu(x))  # type: ignore[arg-type]
