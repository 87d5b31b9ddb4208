"""The int8 GEMM micro-kernel on the x86 integer dot-product instructions (AVX2, AVX-512BW, VNNI),
emitted as LLVM vector code from numba (as gemm/microkernel.py emits the float one).

Why: numba vectorises 8-bit loops into widen-multiply-add sequences that run slower than float32
FMAs; `vpmaddwd` and `vpmaddubsw` multiply and add pairs of small integers in one instruction.

One call computes a ROWS x COLUMNS block of int32 sums C[r, j] = sum_k A[r, k] * B[k, j] over the
whole depth and stores it (row r at c[c_off + r*ldc], COLUMNS int32), or a narrower one of fewer
vectors for the last pixels of a map (each width has a loop of its own). Operands are packed in
groups of depth steps that fill 32 bits: UNIT_U8S8 = 4 steps of bytes, UNIT_S16 = 2 of int16.

- A (weights): panel layout, group g's ROWS 32-bit units at a[a_off + g*ROWS + r] (int32 array),
  each unit the row's weights for the group's steps; one unit is broadcast to all lanes.
- B (activations): group g's row at b[b_off + rows[g]] (a uint8 array; offsets in bytes, ``rows``
  an int64 array), pixel j's unit (its values for the group's steps) at bytes 4j..4j+3 of the row:
  a vector holds LANES pixels. With rows[g] = g * stride B is a packed panel; with the offsets of a
  convolution's taps it is the image itself (channels interleaved by units), read in place.

The block follows the vectors numba compiles for: 512-bit vectors and 8 rows x 3 vectors where the
CPU has AVX-512BW (32 registers), 256-bit ones and 4 x 2 on AVX2 (16 registers).

Two depth loops, chosen per call site (two intrinsics):

- ``dot_u8s8``: B as unsigned bytes, A as signed bytes; `vpmaddubsw` sums two u8 x s8 products into
  int16, `vpmaddwd` by ones sums those pairs into int32. The int16 sum saturates when both products
  are large and of one sign, so it is exact only when every pair of weights (steps 2i, 2i+1 of a
  row) has its positive parts and its negative parts each summing to at most 128 in magnitude (then
  255 * 128 < 2**15): always true of 7-bit weights (onnxruntime's ``reduce_range``). The caller
  checks this when it packs the weights (``pairs_fit_int16``) and otherwise uses the other loop.
- ``dot_s16``: B and A as int16; `vpmaddwd` sums two int16 products into int32, exact for any 8-bit
  values. It does the same work per multiply instruction on CPUs whose adds are not the bottleneck.

Where numba compiles for a CPU with AVX-VNNI or AVX-512 VNNI (``VNNI``), the u8 x s8 loop is
`vpdpbusd` instead: four u8 x s8 products summed into int32 in one instruction, exact for any
weights, so every layer takes it.

Numba must compile for AVX2 (``available()``): these intrinsics have no other lowering.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.base import BaseContext
from numba.core.types import Type
from numba.core.typing import Signature
from numba.core.typing.context import BaseContext as TypingContext

from edgecnn.kernels.cpu.gemm.microkernel import Codegen, _intrinsic, target_features


def has_vnni() -> bool:
    """Whether numba compiles for a CPU with `vpdpbusd` on the vectors the kernel uses (AVX-VNNI,
    or AVX-512 VNNI with VL)."""
    features = target_features()
    return "+avxvnni" in features or {"+avx512vnni", "+avx512vl"} <= features


def wide_vectors() -> bool:
    """Whether numba compiles for a CPU with 512-bit byte and word arithmetic (AVX-512BW): then
    the kernel works on 512-bit vectors in 32 registers."""
    return {"+avx512f", "+avx512bw"} <= target_features()


VNNI = has_vnni()
WIDE = wide_vectors()

LANES = 16 if WIDE else 8
"""int32 sums per vector: one per pixel."""

ROWS = 8 if WIDE else 4
VECTORS = 3 if WIDE else 2
"""The register block: ROWS x VECTORS accumulators, VECTORS activation vectors, a broadcast weight
unit, and without VNNI a product and the ones vector: 24 + 3 + 3 of AVX-512's 32 registers (8 x 3
halves the loads per product of AVX2's 4 x 2), 8 + 2 + 3 of AVX2's 16."""

COLUMNS = LANES * VECTORS
"""Pixels per call."""

UNIT_U8S8 = 4
UNIT_S16 = 2
"""Depth steps per 32-bit unit: bytes, or int16."""

PAIR_LIMIT = 128
"""The largest sum of same-signed weight magnitudes in a `vpmaddubsw` pair that cannot saturate:
255 * 128 = 32640 <= 32767."""


def available() -> bool:
    """Whether numba compiles for a CPU with AVX2 (the features it targets, as the float
    micro-kernel's shape follows them)."""
    return "+avx2" in target_features()


def bytes_exact(weights: np.ndarray) -> bool:
    """Whether the u8 x s8 loop is exact for these (rows, depth) weights: always with VNNI, else
    where no `vpmaddubsw` pair can saturate (``pairs_fit_int16``)."""
    return VNNI or pairs_fit_int16(weights)


def pairs_fit_int16(weights: np.ndarray) -> bool:
    """Whether `vpmaddubsw` is exact for these (rows, depth) int8 weights and any u8 activations:
    in each pair of steps (2i, 2i+1) of a row, positive weights sum to at most PAIR_LIMIT, and so
    do the magnitudes of negative ones (an odd depth's last step pairs with a zero)."""
    w = weights.astype(np.int32)
    if w.shape[1] % 2:
        w = np.pad(w, ((0, 0), (0, 1)))
    pairs = w.reshape(w.shape[0], -1, 2)
    positive = np.maximum(pairs, 0).sum(axis=2)
    negative = np.maximum(-pairs, 0).sum(axis=2)
    return bool(positive.max(initial=0) <= PAIR_LIMIT and negative.max(initial=0) <= PAIR_LIMIT)


def _x86(builder: ir.IRBuilder, name: str, result: ir.Type, *operands: ir.Value) -> ir.Value:
    """A call of the LLVM x86 intrinsic ``name`` (declared in the module once)."""
    signature = ir.FunctionType(result, [v.type for v in operands])
    function = cgutils.get_or_insert_function(builder.module, signature, name)
    return builder.call(function, list(operands))


VPDPBUSD = f"llvm.x86.avx512.vpdpbusd.{32 * LANES}"
PMADDUBSW = "llvm.x86.avx512.pmaddubs.w.512" if WIDE else "llvm.x86.avx2.pmadd.ub.sw"
PMADDWD = "llvm.x86.avx512.pmaddw.d.512" if WIDE else "llvm.x86.avx2.pmadd.wd"
"""The dot-product instructions on LANES-wide vectors (LLVM picks AVX-VNNI's encoding of
`vpdpbusd` where the CPU has no AVX-512)."""


def _codegen(bytes_mode: bool) -> Codegen:
    """The micro-kernel's LLVM code: ``bytes_mode`` = the u8 x s8 loop, else the int16 loop."""

    def codegen(
        context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]
    ) -> ir.Value:
        vectors_v, groups_v, a_v, a_off_v, b_v, b_off_v, rows_v, c_v, c_off_v, ldc_v = args
        index = a_off_v.type
        i32, i16, i8 = ir.IntType(32), ir.IntType(16), ir.IntType(8)
        sums_type = ir.VectorType(i32, LANES)
        shorts = ir.VectorType(i16, 2 * LANES)
        octets = ir.VectorType(i8, 4 * LANES)
        a_ptr = context.make_array(sig.args[2])(context, builder, a_v).data
        b_ptr = context.make_array(sig.args[4])(context, builder, b_v).data
        c_ptr = context.make_array(sig.args[7])(context, builder, c_v).data
        rows_ptr = context.make_array(sig.args[6])(context, builder, rows_v).data
        zero = ir.Constant(sums_type, None)
        ones = ir.Constant(shorts, [1] * (2 * LANES))
        splat = ir.Constant(ir.VectorType(i32, LANES), None)
        operand = octets if bytes_mode else shorts

        def cast(value: ir.Value) -> ir.Value:
            return builder.sext(value, index) if value.type != index else value

        def block(vectors: int) -> None:
            """The depth loop and the stores of a ROWS x ``vectors`` block."""
            sums = [[cgutils.alloca_once_value(builder, zero) for _ in range(vectors)] for _ in range(ROWS)]
            with cgutils.for_range(builder, groups_v) as loop:
                g = cast(loop.index)
                row = builder.add(cast(b_off_v), cast(builder.load(builder.gep(rows_ptr, [g]))))
                activations = []
                for v in range(vectors):
                    at = builder.gep(b_ptr, [builder.add(row, ir.Constant(index, 4 * LANES * v))])
                    activations.append(builder.load(builder.bitcast(at, operand.as_pointer()), align=1))
                panel = builder.add(cast(a_off_v), builder.mul(g, ir.Constant(index, ROWS)))
                for r in range(ROWS):
                    unit = builder.load(builder.gep(a_ptr, [builder.add(panel, ir.Constant(index, r))]))
                    single = builder.insert_element(zero, unit, ir.Constant(i32, 0))
                    weights = builder.bitcast(builder.shuffle_vector(single, single, splat), operand)
                    for v in range(vectors):
                        if bytes_mode and VNNI:
                            words = builder.bitcast(activations[v], sums_type)
                            quads = builder.bitcast(weights, sums_type)
                            total = _x86(builder, VPDPBUSD, sums_type, builder.load(sums[r][v]), words, quads)
                            builder.store(total, sums[r][v])
                            continue
                        if bytes_mode:
                            pairs = _x86(builder, PMADDUBSW, shorts, activations[v], weights)
                            product = _x86(builder, PMADDWD, sums_type, pairs, ones)
                        else:
                            product = _x86(builder, PMADDWD, sums_type, activations[v], weights)
                        builder.store(builder.add(builder.load(sums[r][v]), product), sums[r][v])
            for r in range(ROWS):
                start = builder.add(cast(c_off_v), builder.mul(cast(ldc_v), ir.Constant(index, r)))
                for v in range(vectors):
                    at = builder.gep(c_ptr, [builder.add(start, ir.Constant(index, LANES * v))])
                    builder.store(
                        builder.load(sums[r][v]), builder.bitcast(at, sums_type.as_pointer()), align=4
                    )

        def narrowing(vectors: int) -> None:
            """``vectors`` wide where the call asks for as many, else narrower."""
            if vectors == 1:
                block(1)
                return
            wide = builder.icmp_signed(">=", cast(vectors_v), ir.Constant(index, vectors))
            with builder.if_else(wide) as (then, otherwise):
                with then:
                    block(vectors)
                with otherwise:
                    narrowing(vectors - 1)

        narrowing(VECTORS)
        return context.get_dummy_value()

    return codegen


@_intrinsic
def dot_u8s8(
    typingctx: TypingContext, vectors: Type, groups: Type, a: Type, a_off: Type, b: Type, b_off: Type, rows: Type, c: Type,
    c_off: Type, ldc: Type,
) -> tuple[Signature, Codegen]:  # fmt: skip
    """dot_u8s8(vectors, groups, a, a_off, b, b_off, rows, c, c_off, ldc): the ROWS x (LANES *
    vectors) block (1 <= vectors <= VECTORS; a block's last pixels) over ``groups`` groups of UNIT_U8S8 steps, u8 activations x s8 weights (`vpmaddubsw`); a: int32,
    b: uint8, rows: int64, c: int32 1-D arrays. No bounds checks: the caller pads A's rows and
    keeps every read of B inside it."""
    return types.void(vectors, groups, a, a_off, b, b_off, rows, c, c_off, ldc), _codegen(True)


@_intrinsic
def dot_s16(
    typingctx: TypingContext, vectors: Type, groups: Type, a: Type, a_off: Type, b: Type, b_off: Type, rows: Type, c: Type,
    c_off: Type, ldc: Type,
) -> tuple[Signature, Codegen]:  # fmt: skip
    """dot_u8s8 on int16 units of UNIT_S16 steps (`vpmaddwd`): exact for any 8-bit operands."""
    return types.void(vectors, groups, a, a_off, b, b_off, rows, c, c_off, ldc), _codegen(False)
