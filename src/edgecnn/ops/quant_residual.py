"""QLinearConvAdd: an int8 residual block's tail, QLinearConv then QLinearAdd with the shortcut, as
one operator (edgecnn's own; passes/fuse_int8_residual.py makes it), so that a kernel can add the
shortcut while the convolution's output is written instead of in a pass of its own.

Its meaning is the two operators' one after the other, every rounding included: the convolution's
8-bit output (QLinearConv's requantisation), then QLinearAdd of that output and the shortcut, in the
order the Add had them (``conv_first``: the convolution's output was the Add's A), clamped at the
output's zero point when ``relu``.

Inputs: QLinearConv's nine (x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale,
y_zero_point, bias or ""), then the shortcut, its scale and zero point, the scale and zero point the
Add reads the convolution's output with, and the output's scale and zero point.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import TypeVar

import numpy as np

from edgecnn.ir.graph import TensorType
from edgecnn.ops.common import check, input_type
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.quant import (
    QLinearAddAttrs,
    infer_qlinear_add,
    infer_qlinear_conv,
    qlinear_add,
    qlinear_conv,
)
from edgecnn.ops.registry import register_op
from edgecnn.ops.traits import conv_macs

T = TypeVar("T")

CONV_INPUTS = 9
"""QLinearConv's inputs come first (the bias at CONV_INPUTS - 1, "" where there is none)."""
SHORTCUT, SHORTCUT_SCALE, SHORTCUT_ZP, CONV_SCALE, CONV_ZP, OUT_SCALE, OUT_ZP = range(
    CONV_INPUTS, CONV_INPUTS + 7
)


@dataclass(frozen=True)
class QLinearConvAddAttrs(ConvAttrs):
    """The convolution's attributes; ``relu``: the Add's output clamped at its zero point;
    ``conv_first``: the convolution's output is the Add's first input (A), the shortcut its B."""

    relu: bool = False
    conv_first: bool = True

    def conv_attrs(self) -> ConvAttrs:
        return ConvAttrs(**{f.name: getattr(self, f.name) for f in fields(ConvAttrs)})


def _add_operands(conv: T, operands: Sequence[T], first: bool) -> list[T]:
    """QLinearAdd's eight operands (values or types) from QLinearConvAdd's: the convolution's
    output with its scale and zero point and the shortcut's triple, in the Add's order, then the
    Add's output scale and zero point."""
    own = [conv, operands[CONV_SCALE], operands[CONV_ZP]]
    shortcut = list(operands[SHORTCUT:CONV_SCALE])
    return [*(own + shortcut if first else shortcut + own), operands[OUT_SCALE], operands[OUT_ZP]]


def infer_qlinear_conv_add(
    attrs: QLinearConvAddAttrs, types: Sequence[TensorType | None], values: object
) -> list[TensorType]:
    (conv,) = infer_qlinear_conv(attrs.conv_attrs(), types[:CONV_INPUTS], values)
    shortcut = input_type(types, SHORTCUT, "the shortcut (input 9)")
    check(
        shortcut.shape is None or conv.shape is None or shortcut.shape == conv.shape,
        f"shortcut {shortcut} does not have the convolution's shape {conv.shape}",
    )
    return infer_qlinear_add(QLinearAddAttrs(), _add_operands(conv, types, attrs.conv_first), values)


@register_op(
    "QLinearConvAdd", attrs=QLinearConvAddAttrs, infer=infer_qlinear_conv_add, inputs=16, macs=conv_macs(3)
)
def qlinear_conv_add(attrs: QLinearConvAddAttrs, *inputs: np.ndarray | None) -> np.ndarray:
    """QLinearAdd(QLinearConv(inputs[:9]), shortcut), in the Add's operand order."""
    conv = qlinear_conv(attrs.conv_attrs(), *inputs[:CONV_INPUTS])
    add = QLinearAddAttrs("relu" if attrs.relu else "none")
    return qlinear_add(add, *_add_operands(conv, inputs, attrs.conv_first))
