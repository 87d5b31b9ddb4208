"""Which layers Algorithm 4.2 can split, and one device's slice of such a layer.

A splittable layer is a Conv/FusedConv (output channels; grouped convs split by whole groups, so a slice
reads only its groups' input channels) or a Gemm/FusedGemm (output nodes, the columns of Y) whose weights
are constants. A slice is an ordinary node of the same operator on sliced weights, so every backend's
kernels (chosen with ``select_kernel``) run it unchanged; concatenating the slices along axis 1 gives the
whole layer's output.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.ops.registry import op_family

SPLIT_AXIS = 1
"""Output channels (NCHW) and output nodes (M x N) are both axis 1."""


@dataclass(frozen=True)
class SplitSpec:
    """How a layer divides: ``units`` to share out, ``unit_channels`` output channels per unit and, for
    grouped convolutions, ``unit_inputs`` input channels per unit (0: every slice reads the whole input)."""

    units: int
    unit_channels: int
    unit_inputs: int = 0

    @property
    def channels(self) -> int:
        return self.units * self.unit_channels


T = TypeVar("T")


@dataclass(frozen=True)
class LayerSlice:
    """One device's part of a split layer: the node to prepare a kernel for, its inputs' types and values,
    the output channels it produces and the input channels it reads (None: all of them)."""

    node: Node
    input_types: tuple[TensorType | None, ...]
    input_values: tuple[np.ndarray | None, ...]
    out_range: tuple[int, int]
    in_range: tuple[int, int] | None


def _inputs(node: Node, table: Mapping[str, T]) -> list[T | None]:
    return [table.get(x) if x else None for x in node.inputs]


def split_spec(
    node: Node, types: Mapping[str, TensorType], constants: Mapping[str, np.ndarray]
) -> SplitSpec | None:
    """The layer's split, or None when it runs whole (not a Conv/Gemm, weights not constant, shapes unknown)."""
    values = _inputs(node, constants)
    in_types = _inputs(node, types)
    if op_family(node.op) == "Conv":
        w = values[1]
        x = in_types[0]
        if not isinstance(w, np.ndarray) or w.ndim < 3 or not isinstance(x, TensorType) or not x.is_concrete:
            return None
        if len(values) > 2 and node.inputs[2] and not isinstance(values[2], np.ndarray):
            return None
        group = int(getattr(node.attrs, "group", 1))
        channels = int(w.shape[0])
        if group == 1:
            return SplitSpec(units=channels, unit_channels=1)
        return SplitSpec(units=group, unit_channels=channels // group, unit_inputs=x.dims[1] // group)
    if op_family(node.op) == "Gemm":
        b = values[1]
        if not isinstance(b, np.ndarray) or b.ndim != 2:
            return None
        if len(values) > 2 and node.inputs[2] and not isinstance(values[2], np.ndarray):
            return None
        n = int(b.shape[0] if node.attrs.trans_b else b.shape[1])
        return SplitSpec(units=n, unit_channels=1)
    return None


def slice_layer(
    node: Node,
    types: Mapping[str, TensorType],
    constants: Mapping[str, np.ndarray],
    spec: SplitSpec,
    units: tuple[int, int],
) -> LayerSlice:
    """The node computing units [start, stop) of ``node``'s output (see :func:`split_spec`)."""
    start, stop = units
    if not 0 <= start < stop <= spec.units:
        raise ValueError(f"node {node}: slice {start}:{stop} is outside its {spec.units} units")
    lo, hi = start * spec.unit_channels, stop * spec.unit_channels
    in_types = list(_inputs(node, types))
    values: list[np.ndarray | None] = [
        v if isinstance(v, np.ndarray) else None for v in _inputs(node, constants)
    ]
    attrs = node.attrs
    in_range = None
    if op_family(node.op) == "Conv":
        w = values[1]
        assert w is not None
        values[1] = np.ascontiguousarray(w[lo:hi])
        if len(values) > 2 and values[2] is not None:
            values[2] = np.ascontiguousarray(values[2][lo:hi])
        if spec.unit_inputs:
            in_range = (start * spec.unit_inputs, stop * spec.unit_inputs)
            attrs = dataclasses.replace(attrs, group=stop - start)
            x = in_types[0]
            assert isinstance(x, TensorType) and x.shape is not None
            in_types[0] = TensorType(x.dtype, (x.shape[0], in_range[1] - in_range[0], *x.shape[2:]))
    else:
        b = values[1]
        assert b is not None
        values[1] = np.ascontiguousarray(b[lo:hi] if attrs.trans_b else b[:, lo:hi])
        c = values[2] if len(values) > 2 else None
        if c is not None and c.ndim >= 1 and c.shape[-1] == spec.units and spec.units > 1:
            values[2] = np.ascontiguousarray(c[..., lo:hi])
    for i, value in enumerate(values):
        if value is not None and i > 0:
            in_types[i] = TensorType(str(value.dtype), tuple(int(d) for d in value.shape))
    names = [x if i == 0 or not x else f"{x}[{lo}:{hi}]" for i, x in enumerate(node.inputs)]
    sliced = Node(node.op, f"{node.name}[{lo}:{hi}]", names, [f"{o}[{lo}:{hi}]" for o in node.outputs], attrs)
    return LayerSlice(sliced, tuple(in_types), tuple(values), (lo, hi), in_range)


def unit_ranges(counts: Sequence[int]) -> list[tuple[int, int]]:
    """Contiguous [start, stop) unit ranges for per-device counts, in order (empty ones included)."""
    out, start = [], 0
    for count in counts:
        out.append((start, start + count))
        start += count
    return out
