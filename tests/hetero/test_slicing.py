"""Layer slices: concatenating every device's slice along axis 1 gives the whole layer (reference kernels)."""

from __future__ import annotations

import numpy as np
import pytest

from edgecnn.hetero.slicing import slice_layer, split_spec, unit_ranges
from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.registry import select_kernel
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.dense import GemmAttrs
from edgecnn.ops.fused import FusedConvAttrs
from edgecnn.ops.registry import get_op

rng = np.random.default_rng(0)


def typed(**arrays: np.ndarray) -> dict[str, TensorType]:
    return {k: TensorType(str(v.dtype), tuple(v.shape)) for k, v in arrays.items()}


def check(
    node: Node, x: np.ndarray, constants: dict[str, np.ndarray], counts: list[int], device: str
) -> None:
    types = typed(x=x, **constants)
    spec = split_spec(node, types, constants)
    assert spec is not None and spec.units == sum(counts)
    values = [x if name == "x" else constants.get(name) for name in node.inputs]
    expected = get_op(node.op).reference(node.attrs, *values)
    pieces = []
    for units in unit_ranges(counts):
        if units[1] == units[0]:
            continue
        part = slice_layer(node, types, constants, spec, units)
        kernel = select_kernel(part.node, part.input_types, part.input_values, backend=device)
        xs = x if part.in_range is None else np.ascontiguousarray(x[:, part.in_range[0] : part.in_range[1]])
        pieces.append(kernel.run(xs, *part.input_values[1:]))
    np.testing.assert_allclose(np.concatenate(pieces, axis=1), expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("device", ["reference", "cpu"])
@pytest.mark.parametrize("bias", ["vector", "row", "scalar", "none"])
@pytest.mark.parametrize("trans_b", [False, True])
def test_gemm_slices(device: str, bias: str, trans_b: bool) -> None:
    x = rng.standard_normal((3, 7)).astype(np.float32)
    w = rng.standard_normal((13, 7) if trans_b else (7, 13)).astype(np.float32)
    constants = {"w": w}
    inputs = ["x", "w"]
    if bias != "none":
        shape = {"vector": (13,), "row": (1, 13), "scalar": ()}[bias]
        constants["c"] = rng.standard_normal(shape).astype(np.float32)
        inputs.append("c")
    node = Node("Gemm", "fc", inputs, ["y"], GemmAttrs(alpha=0.5, beta=2.0, trans_b=trans_b))
    check(node, x, constants, [5, 0, 8], device)


@pytest.mark.parametrize("device", ["reference", "cpu"])
@pytest.mark.parametrize("group", [1, 3, 6])
def test_conv_slices(device: str, group: int) -> None:
    x = rng.standard_normal((1, 6, 9, 9)).astype(np.float32)
    w = rng.standard_normal((12, 6 // group, 3, 3)).astype(np.float32)
    b = rng.standard_normal(12).astype(np.float32)
    attrs = FusedConvAttrs(pads=(1, 1, 1, 1), group=group, activation="relu")
    node = Node("FusedConv", "conv", ["x", "w", "b"], ["y"], attrs)
    units = 12 if group == 1 else group
    check(node, x, {"w": w, "b": b}, [units - units // 3, units // 3], device)


def test_not_splittable() -> None:
    x = rng.standard_normal((1, 2, 4, 4)).astype(np.float32)
    w = rng.standard_normal((3, 2, 1, 1)).astype(np.float32)
    conv = Node("Conv", "conv", ["x", "w"], ["y"], ConvAttrs())
    assert split_spec(conv, typed(x=x, w=w), {}) is None  # weights are a runtime input
    relu = Node("Relu", "relu", ["x"], ["y"], None)
    assert split_spec(relu, typed(x=x), {}) is None
    spec = split_spec(conv, typed(x=x, w=w), {"w": w})
    assert spec is not None
    with pytest.raises(ValueError, match="outside"):
        slice_layer(conv, typed(x=x, w=w), {"w": w}, spec, (2, 5))
