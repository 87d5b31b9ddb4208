"""float32 math for compiled loops that LLVM can turn into vector code.

numba compiles ``np.exp`` to a call of the C library's ``exp``, one element at a time: no vector
math library is linked, so a loop with an exponential in it stays scalar, and a Sigmoid or SiLU
epilogue cost several times the convolution it followed. The exponential here is arithmetic,
integer conversions, shifts and a bit cast only, all of which vectorise; the sigmoid's division is a
bare one, without the zero-divisor check of numba's default error model. The exponential keeps its
accuracy when the caller is compiled with fastmath's "reassoc": its rounding to an integer is a
conversion, not an addition of 1.5 * 2**23 that reassociation would cancel.

Every function is ``inline="always"``: numba's on-disk cache keys on the file of the entry
function, so a change here must be followed by touching (or clearing the cache of) the kernels
that inline it.
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

ZERO, HALF, ONE = np.float32(0.0), np.float32(0.5), np.float32(1.0)
LOWEST = np.float32(-87.0)
"""Below this, exp underflows past float32's normal range: taken as 0."""
LOG2E = np.float32(1.4426950408889634)
LN2_HIGH = np.float32(0.693359375)  # ln 2 in two parts (Cody and Waite): k * LN2_HIGH is exact
LN2_LOW = np.float32(-2.12194440e-4)
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


def _quotient_typer(
    typingctx: Any, a: types.Type, b: types.Type
) -> tuple[Signature, Callable[..., ir.Value]] | None:
    """a / b in float32 as a bare LLVM fdiv: numba's default error model checks every float
    division for a zero divisor and raises, a branch that keeps the loop around it scalar."""
    if a != types.float32 or b != types.float32:
        return None

    def codegen(
        context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]
    ) -> ir.Value:
        return builder.fdiv(args[0], args[1])

    return types.float32(a, b), codegen


quotient = cast("Callable[[np.float32, np.float32], np.float32]", intrinsic(_quotient_typer))


@numba.njit(inline="always", cache=True)
def exp_nonpositive(t: np.float32) -> np.float32:
    """exp(t) for t <= 0 in float32, relative error below 3e-7: t = k ln 2 + r with k the nearest
    integer, exp(t) = 2**k exp(r), 2**k built in the exponent bits. 0 below LOWEST (and for -inf),
    NaN for NaN."""
    clamped = LOWEST if t < LOWEST else t  # NaN stays NaN
    k = -np.int32(HALF - clamped * LOG2E)  # the operand is >= 0.5: truncation rounds -t / ln 2
    kf = np.float32(k)
    r = (clamped - kf * LN2_HIGH) - kf * LN2_LOW
    c0, c1, c2, c3, c4, c5, c6 = TAYLOR
    p = c0 + r * (c1 + r * (c2 + r * (c3 + r * (c4 + r * (c5 + r * c6)))))
    scale = float32_from_bits((k + 127) << 23)
    return ZERO if t < LOWEST else p * scale


@numba.njit(inline="always", cache=True)
def sigmoid(x: np.float32) -> np.float32:
    """1 / (1 + exp(-x)) in float32 from ``exp_nonpositive``, which never overflows: exp(-|x|)
    is at most 1. Saturates to exactly 0 and 1 at the infinities; NaN stays NaN."""
    e = exp_nonpositive(-abs(x))
    r = quotient(ONE, ONE + e)  # ONE + e is in [1, 2]
    s = r if x >= ZERO else e * r
    return s if x == x else x
