"""The three GEMM kernels of seed 001 (scalar, float4-vectorised, tiled in local memory) behind one
launcher, and the size rule that picks one. Conv, Gemm and MatMul all end here."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edgecnn.kernels.opencl.runtime import OpenCLDevice
from edgecnn.kernels.opencl.step import NO_ACTIVATION

VARIANTS = ("scalar", "vec4", "tiled")
NO_WRAP = 2**31 - 1
"""batch_mod of an operand whose batch index never wraps around."""


@dataclass(frozen=True)
class Operand:
    """Where element (r, c) of batch b lives: offset + (b % batch_mod) * batch_stride + r * row + c * col."""

    row: int
    col: int
    batch_mod: int = NO_WRAP
    batch_stride: int = 0
    offset: int = 0

    @staticmethod
    def row_major(rows: int, cols: int, batched: bool = False) -> Operand:
        return Operand(cols, 1, NO_WRAP, rows * cols if batched else 0)

    @staticmethod
    def col_major(rows: int, cols: int, batched: bool = False) -> Operand:
        """The transpose of a row-major (cols x rows) matrix."""
        return Operand(1, rows, NO_WRAP, rows * cols if batched else 0)

    def args(self) -> tuple[np.int32, ...]:
        return tuple(
            np.int32(v) for v in (self.offset, self.row, self.col, max(self.batch_mod, 1), self.batch_stride)
        )


@dataclass(frozen=True)
class Epilogue:
    """act(alpha * A @ B + beta * bias)."""

    alpha: float = 1.0
    beta: float = 1.0
    activation: tuple[np.int32, np.float32, np.float32, np.float32] = NO_ACTIVATION

    def args(self) -> tuple[object, ...]:
        return (np.float32(self.alpha), np.float32(self.beta), *self.activation)


def choose_variant(m: int, n: int, k: int) -> str:
    """Tiles pay off once both sides of the output span a tile and k spans several; float4 once k
    has a few vectors; tiny products run scalar."""
    if m >= 16 and n >= 16 and k >= 32:
        return "tiled"
    if k >= 16:
        return "vec4"
    return "scalar"


def enqueue_gemm(
    device: OpenCLDevice,
    variant: str,
    m: int,
    n: int,
    k: int,
    batches: int,
    a: object,
    a_layout: Operand,
    b: object,
    b_layout: Operand,
    y: object,
    y_offset: int = 0,
    bias: object | None = None,
    bias_layout: Operand | None = None,
    epilogue: Epilogue = Epilogue(),
) -> None:
    """Y[b] = epilogue(A[b] @ B[b]) for b < batches; Y row-major (m x n) per batch from ``y_offset``."""
    if m * n * batches == 0:
        return
    if bias is None:
        bias, bias_layout = a, Operand(0, 0)  # any valid buffer; has_bias = 0 keeps it unread
        has_bias = 0
    else:
        has_bias = 1
    assert bias_layout is not None
    args = (
        np.int32(m),
        np.int32(n),
        np.int32(k),
        a,
        *a_layout.args(),
        b,
        *b_layout.args(),
        bias,
        np.int32(has_bias),
        *bias_layout.args()[1:],
        y,
        np.int32(y_offset),
        *epilogue.args(),
    )
    if variant == "tiled":
        ts, wpt = device.tile, device.tile_work
        groups_n, groups_m = (n + ts - 1) // ts, (m + ts - 1) // ts
        device.launch(
            "gemm_tiled", (groups_n * (ts // wpt), groups_m * ts, batches), (ts // wpt, ts, 1), *args
        )
    elif variant in ("scalar", "vec4"):
        device.launch_1d(f"gemm_{variant}", m * n * batches, *args)
    else:
        raise ValueError(f"unknown GEMM variant {variant!r} (known: {', '.join(VARIANTS)})")
