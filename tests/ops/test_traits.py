"""The traits every op declares at register_op are consistent with each other and with what the
runtime, the passes and compression used to spell out as op-name sets."""

from __future__ import annotations

from dataclasses import fields

import numpy as np
import pytest

from edgecnn.ir.graph import Node
from edgecnn.ops.fused import FusedActivation, activation_names
from edgecnn.ops.registry import StepShapes, fusable_activations, get_op, known_ops, op_family
from edgecnn.ops.traits import weight_of

ACTIVATION_FIELDS = {f.name for f in fields(FusedActivation)}

PER_SAMPLE_BEFORE = {
    "Conv", "FusedConv", "ConvTranspose", "MaxPool", "AveragePool", "FusedMaxPool", "FusedAveragePool",
    "GlobalAveragePool", "GlobalMaxPool", "LRN", "BatchNormalization", "InstanceNormalization", "Relu",
    "LeakyRelu", "PRelu", "Elu", "Celu", "Selu", "ThresholdedRelu", "HardSigmoid", "HardSwish",
    "Sigmoid", "Tanh", "Gelu", "Clip", "Identity", "Dropout", "Cast", "Sqrt", "Exp", "Log", "Neg",
    "Abs", "Reciprocal", "Floor", "Ceil", "Round", "Sign", "Erf", "Add", "Sub", "Mul", "Div", "Pow",
    "Max", "Min", "Sum", "Mean", "Reshape", "Squeeze", "DepthToSpace", "SpaceToDepth",
    "Concat", "Split", "Softmax", "LogSoftmax", "Hardmax", "ArgMax", "ArgMin", "Gather",
    "FusedConvAdd", "Gemm", "FusedGemm", "MatMul", "Flatten", "Transpose", "Unsqueeze",
}  # fmt: skip
"""Every op runtime/batch.py could split a batch at before the traits existed."""

NOT_PER_SAMPLE = {"Resize", "Slice", "Pad", "Shape", "ReduceMean", "LayerNormalization", "Expand", "Tile"}
"""Ops that were never split, and still are not (they may mix or reshape the batch axis)."""


def test_fused_forms_belong_to_their_base_family() -> None:
    for name in known_ops():
        op = get_op(name)
        assert op.family in known_ops(), name
        if op.with_activation is None:
            continue
        fused = get_op(op.with_activation)
        assert fused.family == op.family, name
        assert {f.name for f in fields(fused.attrs_type)} >= ACTIVATION_FIELDS, name
        own = {f.name for f in fields(op.attrs_type)} - ACTIVATION_FIELDS
        assert own <= {f.name for f in fields(fused.attrs_type)}, name
        assert fused.with_activation == fused.name, name


def test_families_replace_the_op_tuples() -> None:
    assert op_family("Conv") == op_family("FusedConv") == "Conv"
    assert op_family("Gemm") == op_family("FusedGemm") == "Gemm"
    assert op_family("FusedMaxPool") == "MaxPool" and op_family("FusedAveragePool") == "AveragePool"
    assert op_family("FusedConvAdd") == "FusedConvAdd"  # not a Conv: it reads a residual too
    assert op_family("NoSuchOp") == "NoSuchOp"


def test_fusable_activations_have_unique_names_and_contiguous_codes() -> None:
    activations = fusable_activations()
    assert [a.code for a in activations] == list(range(1, len(activations) + 1))
    assert len({a.name for a in activations}) == len(activations)
    assert activation_names()[:7] == ("none", "relu", "leaky_relu", "clip", "sigmoid", "hard_swish", "silu")
    for a in activations:
        op = get_op(a.op)
        assert {attr for _, attr in a.from_attrs} <= {f.name for f in fields(op.attrs_type)}, a
        assert {field for field, _ in (*a.from_attrs, *a.from_inputs)} <= ACTIVATION_FIELDS, a
        assert all(0 < index < (op.max_inputs or index + 1) for _, index in a.from_inputs), a


def test_fused_activation_applies_the_op_reference() -> None:
    y = np.linspace(-8, 8, 41, dtype=np.float32)
    assert np.array_equal(FusedActivation("relu").apply(y), get_op("Relu").reference(None, y))
    clip = FusedActivation("clip", low=0.0, high=6.0).apply(y)
    assert np.array_equal(clip, np.clip(y, 0, 6)) and clip.dtype == np.float32
    silu = FusedActivation("silu").apply(y)
    assert np.allclose(silu, y / (1 + np.exp(-y.astype(np.float64))), rtol=1e-6, atol=1e-7)
    with pytest.raises(ValueError, match="unknown fused activation"):
        FusedActivation("no_such_activation")


def test_per_sample_ops_are_those_batch_split_knew() -> None:
    """Every op the old sets listed declares per_sample; those added since are elementwise."""
    declared = {name for name in known_ops() if get_op(name).per_sample is not None}
    assert declared >= PER_SAMPLE_BEFORE
    assert not declared & NOT_PER_SAMPLE


def shapes(attrs: object, inputs: list, constants: list, rank: int = 4) -> StepShapes:
    return StepShapes(attrs, tuple(inputs), tuple(constants), rank)


def test_per_sample_special_cases() -> None:
    x, one = (4, 3, 5, 5), np.ones((1, 3, 1, 1), np.float32)
    broadcast = get_op("Add").per_sample
    assert broadcast is not None
    assert broadcast(shapes(None, [x, (1, 3, 1, 1)], [None, one]))
    assert not broadcast(shapes(None, [x, (4, 3, 1, 1)], [None, np.ones((4, 3, 1, 1), np.float32)]))

    def per_sample(op: str, attrs: object, inputs: list, constants: list, rank: int = 2) -> bool:
        check = get_op(op).per_sample
        assert check is not None, op
        return check(shapes(get_op(op).attrs_type(**attrs), inputs, constants, rank))

    w = np.ones((3, 2), np.float32)
    assert per_sample("Gemm", {}, [(4, 3), (3, 2)], [None, w])
    assert not per_sample("Gemm", {"trans_a": True}, [(3, 4), (3, 2)], [None, w])
    assert not per_sample("FusedGemm", {}, [(4, 3), (3, 2), (4, 2)], [None, w, np.ones((4, 2), np.float32)])
    assert per_sample("MatMul", {}, [(4, 3), (3, 2)], [None, w])
    assert not per_sample("MatMul", {}, [(4, 3), (3, 2)], [None, None])
    assert per_sample("Flatten", {"axis": 1}, [x], [None])
    assert not per_sample("Flatten", {"axis": 0}, [x], [None])
    assert per_sample("Transpose", {"perm": (0, 2, 3, 1)}, [x], [None], 4)
    assert not per_sample("Transpose", {"perm": (1, 0, 2, 3)}, [x], [None], 4)
    assert not per_sample("Transpose", {}, [x], [None], 4)  # reversed: batch goes last
    assert per_sample("Concat", {"axis": 1}, [x, x], [None, None], 4)
    assert not per_sample("Concat", {"axis": -4}, [x, x], [None, None], 4)
    assert per_sample("Gather", {"axis": 1}, [x, (2,)], [None, np.array([0, 2])], 4)
    assert not per_sample("Gather", {"axis": 1}, [x, (2,)], [None, None], 4)
    residual = get_op("FusedConvAdd").per_sample
    assert residual is not None
    assert residual(shapes(None, [x, (3, 3, 1, 1), None, x], [None, one, None, None]))
    assert not residual(shapes(None, [x, (3, 3, 1, 1), None, x], [None, one, None, np.ones(x, np.float32)]))


def test_views_are_the_reshaping_ops() -> None:
    views = {name for name in known_ops() if get_op(name).view}
    assert views == {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout"}


@pytest.mark.parametrize(
    ("op", "attrs", "shapes_", "constant", "expected"),
    [
        ("Conv", {}, [(8, 3, 3, 3)], 1, (1, 0)),
        ("FusedConv", {}, [(8, 3, 3, 3)], 1, (1, 0)),
        ("ConvTranspose", {}, [(3, 8, 3, 3)], 1, (1, 1)),
        ("Gemm", {}, [(3, 5)], 1, (1, 1)),
        ("Gemm", {"trans_b": True}, [(5, 3)], 1, (1, 0)),
        ("MatMul", {}, [(3, 5)], 1, (1, 1)),
        ("MatMul", {}, [(5, 3)], 0, (0, 0)),
    ],
)
def test_weight_inputs_and_output_axes(
    op: str, attrs: dict, shapes_: list, constant: int, expected: tuple[int, int]
) -> None:
    inputs = ["x", "w"]
    initializers = {inputs[constant]: np.ones(shapes_[0], np.float32)}
    node = Node(op, "n", inputs, ["y"], get_op(op).attrs_type(**attrs))
    assert weight_of(node, initializers) == (inputs[constant], expected[1])
    assert weight_of(node, {}) is None
    assert weight_of(Node("Relu", "r", ["x"], ["y"]), initializers) is None
