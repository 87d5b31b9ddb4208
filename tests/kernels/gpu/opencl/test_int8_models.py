"""An int8 model quantised by onnxruntime's quantize_static (QDQ, per-channel weights; a zoo
ResNet-18 at an eighth of its width, 64 x 64, BatchNormalization folded first as the lab does;
uint8 or int8 activations) on
opencl:0: every step runs an OpenCL kernel (no 8-bit op falls back to the numpy reference), the
output equals the same float graph on the CPU, and it stays near the int8 reference."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import edgecnn
from edgecnn.model import Model
from edgecnn.passes.qdq_as_clip import clip_activation_qdq
from edgecnn.runtime.options import RuntimeOptions
from kernels.gpu.backends.support import assert_close_to
from kernels.gpu.opencl.support import OPENCL  # noqa: F401  (skips without an OpenCL device)


@pytest.mark.parametrize("activations", ["uint8", "int8"])
def test_quantize_static_resnet18_runs_on_opencl_kernels(tmp_path: Path, activations: str) -> None:
    import onnx
    from onnxruntime.quantization.shape_inference import quant_pre_process

    from edgecnn.bench.zoo import build_model
    from passes.test_fold_qdq import quantized_static

    onnx.save(build_model("resnet18", width=0.125, resolution=64), tmp_path / "float.onnx")
    spec = onnx.load(tmp_path / "float.onnx").graph.input[0]
    shape = [d.dim_value or 1 for d in spec.type.tensor_type.shape.dim]
    rng = np.random.default_rng(9)
    samples = [{spec.name: rng.standard_normal(shape).astype(np.float32)} for _ in range(2)]
    quant_pre_process(str(tmp_path / "float.onnx"), str(tmp_path / "folded.onnx"), skip_symbolic_shape=True)
    quantized_static(tmp_path / "folded.onnx", tmp_path / "qdq.onnx", samples, activations)
    x = rng.standard_normal(shape).astype(np.float32)
    feed = {spec.name: x}

    model = edgecnn.load(tmp_path / "qdq.onnx", device="opencl:0", threads=1)
    plan = model.plan_for(feed)
    ops = [step.node.op for step in plan.steps]
    assert "QLinearConv" not in ops and "QuantizeLinear" not in ops and ops.count("FusedConv") == 20
    fallbacks = [str(step.node) for step in plan.steps if not step.kernel.name.startswith("opencl_")]
    assert not fallbacks, f"steps on the reference: {fallbacks}"
    (actual,) = model.run(feed).values()

    on_cpu = Model(clip_activation_qdq(model.graph).graph, RuntimeOptions.resolve(threads=1))
    (expected,) = on_cpu.run(feed).values()
    assert_close_to(np.asarray(actual), expected)

    int8 = edgecnn.load(tmp_path / "qdq.onnx", threads=1)  # the 8-bit layers on the CPU
    (reference,) = int8.run(feed).values()
    assert not np.array_equal(reference, actual)  # not the int8 model's arithmetic any more ...
    assert np.abs(reference - actual).max() < 0.1 * np.abs(reference).max()  # ... but close to it
