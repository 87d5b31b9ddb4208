"""The depthwise kernel's epilogue: a span of finished sums through the fused activation, in loops
LLVM turns into vector code for every activation kind.

``epilogue.activate`` calls ``np.exp`` per element, which numba compiles to a scalar library call
(no vector math library is linked), so a SiLU or Sigmoid epilogue ran one element at a time and
cost several times the convolution itself. Here the exponential is computed in float32 from
arithmetic, integer shifts and a bit cast only (``exp_nonpositive``), which vectorise; each kind
has a loop of its own (``_map_in_place``), so no per-element branch on the kind is left for LLVM
to hoist.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core.base import BaseContext
from numba.core.typing import Signature
from numba.extending import intrinsic

ZERO, ONE, HALF, SIX = np.float32(0.0), np.float32(1.0), np.float32(0.5), np.float32(6.0)
LOWEST = np.float32(-87.0)
"""Below this, exp underflows past float32's normal range: taken as 0."""
LOG2E = np.float32(1.4426950408889634)
LN2_HIGH = np.float32(0.693359375)  # ln 2 in two parts (Cody and Waite): k * LN2_HIGH is exact
LN2_LOW = np.float32(-2.12194440e-4)
ROUNDER = np.float32(12582912.0)  # 1.5 * 2**23: adding and subtracting it rounds to an integer
TAYLOR = tuple(np.float32(1.0 / f) for f in (1.0, 1.0, 2.0, 6.0, 24.0, 120.0, 720.0))
"""exp's Taylor coefficients to degree 6: below 2e-7 relative error for |r| <= ln(2) / 2."""


def _bits_typer(typingctx: Any, bits: types.Type) -> tuple[Signature, Callable[..., ir.Value]] | None:
    """float32 whose bits are the low 32 of the integer ``bits`` (LLVM: trunc, bitcast)."""
    if not isinstance(bits, types.Integer):
        return None

    def codegen(
        context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]
    ) -> ir.Value:
        value = args[0]
        word = value if value.type == ir.IntType(32) else builder.trunc(value, ir.IntType(32))
        return builder.bitcast(word, ir.FloatType())

    return types.float32(bits), codegen


float32_from_bits = cast("Callable[[int], np.float32]", intrinsic(_bits_typer))


@numba.njit(inline="always", cache=True)
def exp_nonpositive(t: np.float32) -> np.float32:
    """exp(t) for t <= 0 in float32, relative error below 3e-7: t = k ln 2 + r, exp(t) = 2**k exp(r),
    2**k built in the exponent bits; 0 below LOWEST (float32's normal range)."""
    clamped = max(t, LOWEST)
    k = (clamped * LOG2E + ROUNDER) - ROUNDER
    r = (clamped - k * LN2_HIGH) - k * LN2_LOW
    c0, c1, c2, c3, c4, c5, c6 = TAYLOR
    p = c0 + r * (c1 + r * (c2 + r * (c3 + r * (c4 + r * (c5 + r * c6)))))
    scale = float32_from_bits((np.int32(k) + 127) << 23)
    return ZERO if t < LOWEST else p * scale


@numba.njit(inline="always", cache=True)
def _sigmoid(x: np.float32) -> np.float32:
    e = exp_nonpositive(-abs(x))  # never overflows
    r = ONE / (ONE + e)
    s = r if x >= ZERO else e * r
    return s if x == x else x


@numba.njit(inline="always", cache=True)
def _none(v: np.float32, alpha: np.float32, low: np.float32, high: np.float32) -> np.float32:
    return v


@numba.njit(inline="always", cache=True)
def _relu(v: np.float32, alpha: np.float32, low: np.float32, high: np.float32) -> np.float32:
    return ZERO if v <= ZERO else v  # NaN stays NaN, as with np.maximum


@numba.njit(inline="always", cache=True)
def _leaky_relu(v: np.float32, alpha: np.float32, low: np.float32, high: np.float32) -> np.float32:
    return v if v >= ZERO else v * alpha


@numba.njit(inline="always", cache=True)
def _clip(v: np.float32, alpha: np.float32, low: np.float32, high: np.float32) -> np.float32:
    return v if v != v else min(max(v, low), high)


@numba.njit(inline="always", cache=True)
def _sigmoid_kind(v: np.float32, alpha: np.float32, low: np.float32, high: np.float32) -> np.float32:
    return _sigmoid(v)


@numba.njit(inline="always", cache=True)
def _hard_swish(v: np.float32, alpha: np.float32, low: np.float32, high: np.float32) -> np.float32:
    return v * min(max(v / SIX + HALF, ZERO), ONE)


@numba.njit(inline="always", cache=True)
def _silu(v: np.float32, alpha: np.float32, low: np.float32, high: np.float32) -> np.float32:
    return v * _sigmoid(v)


@numba.njit(inline="always", cache=True)
def _hard_sigmoid(v: np.float32, alpha: np.float32, low: np.float32, high: np.float32) -> np.float32:
    t = v * alpha + low  # scale, offset
    return t if t != t else min(max(t, ZERO), ONE)


@numba.njit(inline="always", cache=True, fastmath={"contract"})
def _map_in_place(
    f: Callable[..., np.float32],
    buf: np.ndarray,
    at: np.uint64,
    count: np.uint64,
    alpha: np.float32,
    low: np.float32,
    high: np.float32,
) -> None:
    """buf[at + i] = f(buf[at + i]) in place: with two arrays, LLVM checks for overlap at run time
    and an in-place call would always take its scalar fallback."""
    for i in range(count):
        buf[at + i] = f(buf[at + i], alpha, low, high)


@numba.njit(inline="always", cache=True)
def activate_in_place(
    buf: np.ndarray, at: np.uint64, count: np.uint64, kind: int, alpha: float, low: float, high: float
) -> None:
    """buf[at + i] = act(buf[at + i]) for i < count (no activation: nothing to do)."""
    a, lo, hi = np.float32(alpha), np.float32(low), np.float32(high)
    if kind == 1:
        _map_in_place(_relu, buf, at, count, a, lo, hi)
    elif kind == 2:
        _map_in_place(_leaky_relu, buf, at, count, a, lo, hi)
    elif kind == 3:
        _map_in_place(_clip, buf, at, count, a, lo, hi)
    elif kind == 4:
        _map_in_place(_sigmoid_kind, buf, at, count, a, lo, hi)
    elif kind == 5:
        _map_in_place(_hard_swish, buf, at, count, a, lo, hi)
    elif kind == 6:
        _map_in_place(_silu, buf, at, count, a, lo, hi)
    elif kind == 7:
        _map_in_place(_hard_sigmoid, buf, at, count, a, lo, hi)
