"""float32 math for compiled loops that LLVM can turn into vector code.

numba compiles ``np.exp`` to a call of the C library's ``exp``, one element at a time: no vector
math library is linked, so a loop with an exponential in it stays scalar, and a Sigmoid or SiLU
epilogue cost several times the convolution it followed. The exponential here is arithmetic,
integer conversions, shifts and a bit cast only, all of which vectorise; the sigmoid's division is a
bare one, without the zero-divisor check of numba's default error model. The exponential keeps its
accuracy when the caller is compiled with fastmath's "reassoc": its rounding to an integer is a
conversion, not an addition of 1.5 * 2**23 that reassociation would cancel. Its multiply-adds are
LLVM's ``fmuladd``, fused wherever the CPU has FMA whatever fastmath flags the caller has: the
exponential is about half the work of a SiLU epilogue, and fusing halves its arithmetic.

Every function is ``inline="always"``; the kernels that inline them are recompiled after a change
here (system/kernel_cache.py stamps their cached code with the modules they import).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.base import BaseContext
from numba.core.typing import Signature
from numba.extending import intrinsic

ZERO, HALF, ONE = np.float32(0.0), np.float32(0.5), np.float32(1.0)
LOWEST = np.float32(-87.0)
"""Below this, exp underflows past float32's normal range: taken as 0."""
NEG_LOG2E = np.float32(-1.4426950408889634)
LN2_HIGH = np.float32(0.693359375)  # ln 2 in two parts (Cody and Waite): m * LN2_HIGH is exact
LN2_LOW = np.float32(-2.12194440e-4)
EXP_POLY = tuple(np.float32(c) for c in (0.99999971, 0.4999915, 0.16667636, 0.04189793, 0.00829031))
"""exp(r) ~ 1 + c1 r + ... + c5 r**5 on |r| <= ln(2) / 2: a minimax fit of the relative error
(Lawson's iteration on 4001 Chebyshev points), 9.2e-8 before rounding, below 2e-7 evaluated in float32."""


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


def _multiply_add_typer(
    typingctx: Any, a: types.Type, b: types.Type, c: types.Type
) -> tuple[Signature, Callable[..., ir.Value]] | None:
    """a * b + c in float32 as LLVM's ``fmuladd``: one fused instruction on a CPU with FMA, a
    multiply and an add on one without, vectorised either way."""
    if not a == b == c == types.float32:
        return None

    def codegen(
        context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]
    ) -> ir.Value:
        f32 = ir.FloatType()
        fmuladd = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(f32, [f32, f32, f32]), "llvm.fmuladd.f32"
        )
        return builder.call(fmuladd, list(args))

    return types.float32(a, b, c), codegen


multiply_add = cast(
    "Callable[[np.float32, np.float32, np.float32], np.float32]", intrinsic(_multiply_add_typer)
)


@numba.njit(inline="always", cache=True)
def exp_nonpositive(t: np.float32) -> np.float32:
    """exp(t) for t <= 0 in float32, relative error below 2e-7: t = -m ln 2 + r with m the nearest
    integer to -t / ln 2, exp(t) = 2**-m exp(r), 2**-m built in the exponent bits. 0 below LOWEST
    (and for -inf), NaN for NaN."""
    clamped = LOWEST if t < LOWEST else t  # NaN stays NaN
    m = np.int32(multiply_add(clamped, NEG_LOG2E, HALF))  # >= 0.5: truncation rounds -t / ln 2
    mf = np.float32(m)
    r = multiply_add(mf, LN2_LOW, multiply_add(mf, LN2_HIGH, clamped))
    c1, c2, c3, c4, c5 = EXP_POLY
    p = multiply_add(r, multiply_add(r, multiply_add(r, multiply_add(r, c5, c4), c3), c2), c1)
    scale = float32_from_bits((127 - m) << 23)
    return ZERO if t < LOWEST else multiply_add(r, p, ONE) * scale


@numba.njit(inline="always", cache=True)
def sigmoid(x: np.float32) -> np.float32:
    """1 / (1 + exp(-x)) in float32 from ``exp_nonpositive``, which never overflows: exp(-|x|)
    is at most 1: 1 / (1 + e) for x >= 0, e / (1 + e) below, one division either way. Saturates
    to exactly 0 and 1 at the infinities; NaN stays NaN (through e)."""
    e = exp_nonpositive(-abs(x))
    return quotient(ONE if x >= ZERO else e, ONE + e)  # ONE + e is in [1, 2]
