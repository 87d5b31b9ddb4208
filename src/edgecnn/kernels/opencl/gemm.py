"""The three GEMM kernels of seed 001 (scalar, float4-vectorised, tiled in local memory) and a
register-blocked one, behind one launcher, and the size rule that picks one. Conv, Gemm and MatMul
all end here."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edgecnn.kernels.gpu.activations import NO_ACTIVATION, ActivationParams
from edgecnn.kernels.opencl.runtime import OpenCLDevice

VARIANTS = ("scalar", "vec4", "tiled", "blocked")
BLOCK_ROWS, BLOCK_COLS = 4, 8
"""Output block of one gemm_blocked work item; B's rows must be readable to a multiple of BLOCK_COLS."""
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
    activation: ActivationParams = NO_ACTIVATION

    def args(self) -> tuple[object, ...]:
        return (np.float32(self.alpha), np.float32(self.beta), *self.activation)


def choose_variant(m: int, n: int, k: int, blockable: bool = False, cpu: bool = True) -> str:
    """The GEMM kernel for an (m x k) @ (k x n) product, from measurements (docs/heterogeneous.md).

    On CPU devices register blocks win once there are rows to block and B's rows are padded for
    float8 loads (``blockable``). On GPUs the tiled and even the scalar kernel beat the blocked one,
    whose work items each stream a separate 4-row band. Otherwise: tiles once
    both sides of the output span a tile and k spans several; float4 dot products for GEMV-like
    products (few rows, long k); tiny products run scalar."""
    if cpu and blockable and m >= BLOCK_ROWS and n >= BLOCK_COLS:
        return "blocked"
    if m >= 16 and n >= 16 and k >= 32:
        return "tiled"
    if k >= 16:
        return "vec4"
    return "scalar"


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def padded_columns(n: int) -> int:
    """Row length that lets gemm_blocked read float8s up to column n."""
    return ceil_div(n, BLOCK_COLS) * BLOCK_COLS


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
        groups_n, groups_m = ceil_div(n, ts), ceil_div(m, ts)
        device.launch(
            "gemm_tiled", (groups_n * (ts // wpt), groups_m * ts, batches), (ts // wpt, ts, 1), *args
        )
    elif variant == "blocked":
        assert a_layout.col == 1 and b_layout.col == 1, "gemm_blocked reads row-major A and B"
        step = device.local_size
        columns = ceil_div(ceil_div(n, BLOCK_COLS), step) * step
        device.launch("gemm_blocked", (columns, ceil_div(m, BLOCK_ROWS), batches), (step, 1, 1), *args)
    elif variant in ("scalar", "vec4"):
        device.launch_1d(f"gemm_{variant}", m * n * batches, *args)
    else:
        raise ValueError(f"unknown GEMM variant {variant!r} (known: {', '.join(VARIANTS)})")
