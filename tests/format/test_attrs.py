"""Every registered operator's attrs class survives save -> load, with defaults and with unusual values;
the type-driven codec also handles the field types no op uses yet."""

from __future__ import annotations

import dataclasses
import enum
import math
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Union

import numpy as np
import pytest
from ecnn_helpers import assert_graphs_equal, values_equal

from edgecnn.errors import GraphError
from edgecnn.format import EcnnFormatError, load_ecnn, save_ecnn
from edgecnn.format.attrs_codec import decode_attrs, encode_attrs, field_types
from edgecnn.format.checked_json import CheckedJson
from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.ops.registry import get_op, known_ops

ARRAYS = [
    np.arange(6, dtype=np.float32).reshape(2, 3),
    np.array([1, -2, 3], np.int64),
    np.array(np.nan, np.float64),
]


def sample(tp: Any, variant: int) -> Any:
    """A value of type ``tp``; variants 0..2 differ (variant 2 holds the edge cases)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is bool:
        return variant != 1
    if tp is int:
        return [3, -7, 2**62][variant]
    if tp is float:
        return [0.25, -1e-30, math.nan][variant]
    if tp is str:
        return ["x", "ünï ✓", ""][variant]
    if origin in (Union, getattr(__import__("types"), "UnionType", Union)):
        non_none = [a for a in args if a is not type(None)]
        return (
            None
            if variant == 2 and type(None) in args
            else sample(non_none[variant % len(non_none)], variant)
        )
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(sample(args[0], (variant + i) % 2) for i in range([2, 0, 4][variant]))
        return tuple(sample(a, variant) for a in args)
    if origin is list:
        return [sample(args[0], variant)] * variant
    if origin is dict:
        return {f"k{i}": sample(args[1], variant) for i in range(variant)}
    if origin is Literal:
        return args[variant % len(args)]
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        members = list(tp)
        return members[(variant + 1) % len(members)]
    if tp is np.ndarray:
        return ARRAYS[variant]
    if dataclasses.is_dataclass(tp):
        return build(tp, variant, all_fields=True)
    raise AssertionError(f"no sample for {tp}")


def build(cls: type, variant: int, *, all_fields: bool) -> Any:
    """An instance: required fields sampled; with ``all_fields`` every other field takes its sample
    too, unless the class's own validation refuses that value (then it keeps its default)."""
    hints = field_types(cls)
    fields = [f for f in dataclasses.fields(cls) if f.init]
    optional = {
        f.name
        for f in fields
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
    }
    values = {f.name: sample(hints[f.name], variant) for f in fields if f.name not in optional}
    for name in sorted(optional) if all_fields else ():
        trial = {**values, name: sample(hints[name], variant)}
        try:
            cls(**trial)
        except (ValueError, TypeError):
            continue
        values = trial
    return cls(**values)


def registered_attrs() -> dict[type, list[str]]:
    result: dict[type, list[str]] = {}
    for op in sorted(known_ops()):
        result.setdefault(get_op(op).attrs_type, []).append(op)
    return result


def round_trip(nodes: list[Node], path: Path) -> Graph:
    graph = Graph(
        [TensorSpec("x", "float32", (1,))], [o for n in nodes for o in n.outputs], nodes, name="attrs"
    )
    save_ecnn(graph, path)
    loaded = load_ecnn(path, verify=True)
    assert_graphs_equal(graph, loaded)
    return loaded


def test_every_registered_attrs_class_round_trips(tmp_path: Path) -> None:
    classes = registered_attrs()
    assert len(classes) >= 25, "the registry looks empty"
    nodes = []
    for cls, ops in classes.items():
        instances = [build(cls, 0, all_fields=False)] + [build(cls, v, all_fields=True) for v in range(3)]
        for op in ops:
            for k, attrs in enumerate(instances):
                nodes.append(Node(op, f"{op}_{k}", ["x"], [f"{op}_{k}_out"], attrs))
    loaded = round_trip(nodes, tmp_path / "all.ecnn")
    assert {type(n.attrs) for n in loaded.nodes} == set(classes)


def test_non_default_values_of_common_ops(tmp_path: Path) -> None:
    from edgecnn.ops.common import AutoPad
    from edgecnn.ops.conv import ConvAttrs
    from edgecnn.ops.pool import AveragePoolAttrs
    from edgecnn.ops.shape import ConstantAttrs, ShapeAttrs

    nodes = [
        Node(
            "Conv", "c", ["x"], ["c"], ConvAttrs((5, 3), (2, 1), (1, 2, 1, 2), (1, 3), 4, AutoPad.SAME_LOWER)
        ),
        Node(
            "AveragePool", "p", ["x"], ["p"], AveragePoolAttrs((3,), ceil_mode=True, count_include_pad=True)
        ),
        Node("Shape", "s1", ["x"], ["s1"], ShapeAttrs(start=-2, end=None)),
        Node("Shape", "s2", ["x"], ["s2"], ShapeAttrs(start=1, end=-1)),
        Node("Constant", "k1", [], ["k1"], ConstantAttrs(np.array([[np.inf, -0.0]], np.float16))),
        Node("Constant", "k2", [], ["k2"], ConstantAttrs(np.array(True))),
    ]
    loaded = round_trip(nodes, tmp_path / "common.ecnn")
    assert loaded.nodes[0].attrs.auto_pad is AutoPad.SAME_LOWER
    assert isinstance(loaded.nodes[0].attrs.kernel_shape, tuple)


def test_floats_keep_nan_inf_and_exact_bits(tmp_path: Path) -> None:
    from edgecnn.ops.activation import LeakyReluAttrs

    values = [math.nan, math.inf, -math.inf, -0.0, 5e-324, 1.7976931348623157e308, 0.1, 1 / 3]
    nodes = [Node("LeakyRelu", f"l{i}", ["x"], [f"y{i}"], LeakyReluAttrs(v)) for i, v in enumerate(values)]
    loaded = round_trip(nodes, tmp_path / "floats.ecnn")
    for value, node in zip(values, loaded.nodes):
        assert values_equal(node.attrs.alpha, value)


class Colour(enum.Enum):
    RED = 1
    GREEN = "g"


@dataclass(frozen=True)
class Inner:
    weights: np.ndarray
    scale: float = 1.0


@dataclass(frozen=True)
class EveryKindAttrs:
    """Field types no registered op uses yet, so the codec is ready for them."""

    either: Union[int, str] = 0
    maybe_float: float | None = None
    number: float | int = 1.0
    pair: tuple[int, str] = (1, "a")
    names: list[str] = field(default_factory=list)
    table: dict[str, float] = field(default_factory=dict)
    mode: Literal["fast", "exact"] = "fast"
    colour: Colour = Colour.RED
    inner: Inner | None = None
    parts: tuple[Inner, ...] = ()
    derived: int = field(default=0, init=False)


def codec_round_trip(attrs: Any) -> Any:
    tables: dict[str, np.ndarray] = {}

    def sink(array: np.ndarray, where: str) -> str:
        tables[where] = array
        return where

    encoded = encode_attrs(Node("Custom", "n", [], [], attrs), type(attrs), sink)
    check = CheckedJson("<test>")
    return decode_attrs(encoded, type(attrs), "attrs", check, lambda name, where: tables[name])


@pytest.mark.parametrize(
    "attrs",
    [
        EveryKindAttrs(),
        EveryKindAttrs(
            either="text",
            maybe_float=math.inf,
            number=7,
            pair=(-1, ""),
            names=["a", "b"],
            table={"x": math.nan, "y": 2.0},
            mode="exact",
            colour=Colour.GREEN,
            inner=Inner(np.ones((2, 2), np.float32), -0.5),
            parts=(Inner(np.zeros(3, np.int8)), Inner(np.array([], np.float64), 2.0)),
        ),
    ],
)
def test_codec_handles_unions_containers_literals_enums_and_nested_dataclasses(attrs: EveryKindAttrs) -> None:
    decoded = codec_round_trip(attrs)
    assert values_equal(attrs, decoded)
    assert type(decoded.number) is type(attrs.number)  # an int in a float | int field stays an int


def test_codec_refuses_values_that_do_not_match_their_declared_types() -> None:
    with pytest.raises(GraphError, match=r"attrs\.pair\[1\]"):
        codec_round_trip(EveryKindAttrs(pair=(1, 2)))  # type: ignore[arg-type]
    with pytest.raises(GraphError, match="outside the int64 range"):
        codec_round_trip(EveryKindAttrs(pair=(2**64, "a")))
    with pytest.raises(GraphError, match=r"attrs\.colour"):
        codec_round_trip(EveryKindAttrs(colour="RED"))  # type: ignore[arg-type]


def test_decode_errors_name_the_field() -> None:
    check = CheckedJson("f.ecnn")
    bad = [
        ({"either": 1.5}, "attrs.either"),
        ({"pair": [1]}, "attrs.pair"),
        ({"mode": "slow"}, "attrs.mode"),
        ({"colour": "BLUE"}, "attrs.colour"),
        ({"table": {"x": "1"}}, "attrs.table.x"),
        ({"maybe_float": {"float": "huge"}}, "attrs.maybe_float"),
        ({"inner": {"scale": 1.0}}, "missing required field 'weights'"),
        ({"inner": {"weights": {"tensor": 3}}}, "attrs.inner.weights.tensor"),
        ({"derived": 1}, "no field"),
        ([], "expected an object"),
    ]
    for data, where in bad:
        with pytest.raises(EcnnFormatError, match=re.escape(where)):
            decode_attrs(data, EveryKindAttrs, "attrs", check, lambda name, w: np.zeros(1))
