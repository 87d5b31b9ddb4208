"""What every 2-D convolution kernel prepares the same way: the geometry with defaults and SAME
padding resolved (``ConvSetup``), and the bias and activation of its epilogue (``ConvKernel``)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from edgecnn.ir.graph import Node, TensorType, concrete_dims
from edgecnn.kernels.cpu.conv.im2col import NO_TAP_TABLE, gathers_columns, tap_table
from edgecnn.kernels.cpu.gemm.epilogue import activation_args
from edgecnn.kernels.cpu.system.common import is_float32, shape_of
from edgecnn.ops.conv import ConvAttrs, conv_geometry
from edgecnn.ops.spatial import output_dims


@dataclass(frozen=True)
class ConvSetup:
    """A 2-D convolution's geometry with every default and SAME padding resolved."""

    batch: int
    in_channels: int
    height: int
    width: int
    out_channels: int
    kernel: tuple[int, int]
    strides: tuple[int, int]
    dilations: tuple[int, int]
    pads: tuple[int, int, int, int]  # top, left, bottom, right
    out: tuple[int, int]
    group: int

    @property
    def depthwise(self) -> bool:
        return self.group == self.in_channels > 1 and self.out_channels % self.in_channels == 0

    @property
    def window(self) -> tuple[int, int, int, int, int, int, int, int]:
        """(kernel h, w, stride h, w, pad top, left, dilation h, w): the geometry arguments every
        compiled im2col-style loop takes, in that order."""
        return (*self.kernel, *self.strides, self.pads[0], self.pads[1], *self.dilations)

    @property
    def pointwise(self) -> bool:
        return self.kernel == (1, 1) and self.strides == (1, 1) and not any(self.pads)


def conv_setup(node: Node, types: Sequence[TensorType | None]) -> ConvSetup | None:
    """The setup if a compiled kernel can run this node (float32, 4-D, known shapes), else None.

    Memoised: every conv kernel's predicate asks for it while a plan is built (ResNet-50: 574 calls
    for 69 convolutions, 50 ms of its first inference); attrs and types are frozen values."""
    attrs = node.attrs
    if not isinstance(attrs, ConvAttrs) or len(types) < 2:
        return None
    try:
        return _setup(attrs, types[0], types[1])
    except TypeError:  # an attribute held in an unhashable container: compute it uncached
        return _setup.__wrapped__(attrs, types[0], types[1])


@functools.lru_cache(maxsize=4096)
def _setup(attrs: ConvAttrs, x: TensorType | None, w: TensorType | None) -> ConvSetup | None:
    if not (is_float32(x, 4) and is_float32(w, 4)):
        return None
    x_shape, w_shape = shape_of(x), shape_of(w)
    geo = conv_geometry(attrs, x_shape, w_shape)
    if geo.pads is None:
        return None
    out = output_dims(x_shape[2:], geo.kernel, geo.strides, geo.dilations, geo.pads)
    if not all(isinstance(d, int) and d > 0 for d in out):
        return None
    out_h, out_w = concrete_dims(out)
    top, left, bottom, right = geo.pads
    return ConvSetup(
        batch=x_shape[0],
        in_channels=x_shape[1],
        height=x_shape[2],
        width=x_shape[3],
        out_channels=w_shape[0],
        kernel=(int(geo.kernel[0]), int(geo.kernel[1])),
        strides=(geo.strides[0], geo.strides[1]),
        dilations=(geo.dilations[0], geo.dilations[1]),
        pads=(top, left, bottom, right),
        out=(out_h, out_w),
        group=attrs.group,
    )


class ConvKernel:
    """Shared preparation: geometry, bias, activation, the output shape."""

    run_into: Callable[[np.ndarray, np.ndarray], None]
    """run_into(out, x): the layer's output written into ``out``; every kernel defines it."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        setup = conv_setup(node, types)
        assert setup is not None
        self.setup = setup
        self.activation = activation_args(node.attrs)  # (kind, negative slope, low, high)
        self.kind = self.activation[0]
        bias = values[2] if len(values) > 2 else None
        self.has_bias = bias is not None
        # zeros where the layer has none: kernels whose stores add a row's bias read it either way
        self.bias = np.ascontiguousarray(
            bias if bias is not None else np.zeros(setup.out_channels), dtype=np.float32
        )
        self.out_shape = (setup.batch, setup.out_channels, *setup.out)
        self.pixels = setup.out[0] * setup.out[1]
        self._tiles: dict[int, Any] = {}
        # per-run scratch of the kernels that copy the input into a zero-padded frame (direct,
        # direct rows, pixel rows, Winograd); planning counts it with the arena (runtime/memory.py)
        top, left, bottom, right = setup.pads
        padded = (setup.height + top + bottom) * (setup.width + left + right)
        self.workspace = 4 * setup.batch * setup.in_channels * padded

    def im2col_taps(self) -> np.ndarray:
        """The layer's im2col tap table where its unfold goes through one (``gathers_columns``:
        narrow output rows), else NO_TAP_TABLE (unfolded segment by segment, or no im2col at all)."""
        s = self.setup
        if s.pointwise or not gathers_columns(s.width, s.strides, s.out):
            return NO_TAP_TABLE
        return tap_table(s.height, s.width, s.kernel, s.strides, (s.pads[0], s.pads[1]), s.dilations, s.out)

    def tiles(self, threads: int) -> Any:
        """The layer's tiling on ``threads`` threads (``plan_tiles``), computed once per count."""
        plan = self._tiles.get(threads)
        if plan is None:
            plan = self._tiles[threads] = self.plan_tiles(threads)
        return plan

    def plan_tiles(self, threads: int) -> Any:
        """How the kernels that cut the layer into tiles cut it (each defines its own)."""
        raise NotImplementedError

    def __call__(self, x: np.ndarray, *_: object) -> np.ndarray:
        """The output in a new array: ``run_into``, which every kernel defines, on a fresh buffer."""
        out = np.empty(self.out_shape, dtype=np.float32)
        self.run_into(out, x)
        return out


_NO_RESIDUAL = np.empty(0, dtype=np.float32)


class ResidualIntoKernel(ConvKernel):
    """A kernel that can add a residual block's sum before the activation in its own last pass over
    the output (conv/residual.py uses ``run_into_residual`` when a kernel has it); ``_run`` does
    both, with an empty residual meaning none."""

    overwrites_residual = True
    """Whether conv/residual.py may give the output the residual's own buffer (a kernel turns it off
    where that costs more than a fresh buffer: conv/pixel_rows.py, reading its input in place)."""

    def run_into(self, out: np.ndarray, x: np.ndarray, *_: object) -> None:
        """Writes into ``out`` (C-contiguous, the output's shape; must not overlap ``x``)."""
        self._run(out, x, _NO_RESIDUAL, self.activation)

    def run_into_residual(
        self,
        out: np.ndarray,
        x: np.ndarray,
        residual: np.ndarray,
        activation: tuple[int, float, float, float],
    ) -> None:
        """out = activation(conv(x) + residual) (this layer's own activation must be the identity)."""
        assert self.kind == 0
        self._run(out, x, np.ascontiguousarray(residual), activation)

    def _run(
        self,
        out: np.ndarray,
        x: np.ndarray,
        residual: np.ndarray,
        activation: tuple[int, float, float, float],
    ) -> None:
        raise NotImplementedError
