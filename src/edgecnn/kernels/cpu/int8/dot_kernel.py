"""The int8 GEMM micro-kernel on AVX2's integer dot-product instructions, emitted as LLVM vector
code from numba (as gemm/microkernel.py emits the float one).

Why: numba vectorises 8-bit loops into widen-multiply-add sequences that run slower than float32
FMAs; `vpmaddwd` and `vpmaddubsw` multiply and add pairs of small integers in one instruction.

One call computes a ROWS x COLUMNS block of int32 sums C[r, j] = sum_k A[r, k] * B[k, j] over the
whole depth and stores it (row r at c[c_off + r*ldc], COLUMNS int32). Operands are packed in
groups of depth steps that fill 32 bits: UNIT_U8S8 = 4 steps of bytes, UNIT_S16 = 2 of int16.

- A (weights): panel layout, group g's ROWS 32-bit units at a[a_off + g*ROWS + r] (int32 array),
  each unit the row's weights for the group's steps; one unit is broadcast to all lanes.
- B (activations): group g's row at b[b_off + rows[g]] (a uint8 array; offsets in bytes, ``rows``
  an int64 array), pixel j's unit (its values for the group's steps) at bytes 4j..4j+3 of the row:
  32 bytes hold 8 pixels. With rows[g] = g * stride B is a packed panel; with the offsets of a
  convolution's taps it is the image itself (channels interleaved by units), read in place.

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
weights, so every layer takes it. That path compiles for VNNI targets but has not yet run on one
(its tests run wherever numba targets VNNI).

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

ROWS = 4
"""Output channels per call (each weight unit broadcast once per group)."""

LANES = 8
"""int32 sums per 256-bit vector: one per pixel."""

VECTORS = 2
COLUMNS = LANES * VECTORS
"""Pixels per call: 4 x 2 accumulators, 2 activation vectors, a broadcast, a product and the
ones vector fit AVX2's 16 registers."""

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


def has_vnni() -> bool:
    """Whether numba compiles for a CPU with 256-bit `vpdpbusd` (AVX-VNNI, or AVX-512 VNNI + VL)."""
    features = target_features()
    return "+avxvnni" in features or {"+avx512vnni", "+avx512vl"} <= features


VNNI = has_vnni()


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


def _codegen(bytes_mode: bool) -> Codegen:
    """The micro-kernel's LLVM code: ``bytes_mode`` = the u8 x s8 loop, else the int16 loop."""

    def codegen(
        context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]
    ) -> ir.Value:
        groups_v, a_v, a_off_v, b_v, b_off_v, rows_v, c_v, c_off_v, ldc_v = args
        index = a_off_v.type
        i32, i16, i8 = ir.IntType(32), ir.IntType(16), ir.IntType(8)
        sums_type = ir.VectorType(i32, LANES)
        shorts = ir.VectorType(i16, 2 * LANES)
        octets = ir.VectorType(i8, 4 * LANES)
        a_ptr = context.make_array(sig.args[1])(context, builder, a_v).data
        b_ptr = context.make_array(sig.args[3])(context, builder, b_v).data
        c_ptr = context.make_array(sig.args[6])(context, builder, c_v).data
        rows_ptr = context.make_array(sig.args[5])(context, builder, rows_v).data
        zero = ir.Constant(sums_type, None)
        ones = ir.Constant(shorts, [1] * (2 * LANES))
        splat = ir.Constant(ir.VectorType(i32, LANES), None)
        sums = [[cgutils.alloca_once_value(builder, zero) for _ in range(VECTORS)] for _ in range(ROWS)]
        operand = octets if bytes_mode else shorts

        def cast(value: ir.Value) -> ir.Value:
            return builder.sext(value, index) if value.type != index else value

        with cgutils.for_range(builder, groups_v) as loop:
            g = cast(loop.index)
            row = builder.add(cast(b_off_v), cast(builder.load(builder.gep(rows_ptr, [g]))))
            activations = []
            for v in range(VECTORS):
                at = builder.gep(b_ptr, [builder.add(row, ir.Constant(index, 4 * LANES * v))])
                activations.append(builder.load(builder.bitcast(at, operand.as_pointer()), align=1))
            panel = builder.add(cast(a_off_v), builder.mul(g, ir.Constant(index, ROWS)))
            for r in range(ROWS):
                unit = builder.load(builder.gep(a_ptr, [builder.add(panel, ir.Constant(index, r))]))
                single = builder.insert_element(zero, unit, ir.Constant(i32, 0))
                weights = builder.bitcast(builder.shuffle_vector(single, single, splat), operand)
                for v in range(VECTORS):
                    if bytes_mode and VNNI:
                        words = builder.bitcast(activations[v], sums_type)
                        quads = builder.bitcast(weights, sums_type)
                        total = _x86(
                            builder, "llvm.x86.avx512.vpdpbusd.256", sums_type,
                            builder.load(sums[r][v]), words, quads,
                        )  # fmt: skip
                        builder.store(total, sums[r][v])
                        continue
                    if bytes_mode:
                        pairs = _x86(builder, "llvm.x86.avx2.pmadd.ub.sw", shorts, activations[v], weights)
                        product = _x86(builder, "llvm.x86.avx2.pmadd.wd", sums_type, pairs, ones)
                    else:
                        product = _x86(builder, "llvm.x86.avx2.pmadd.wd", sums_type, activations[v], weights)
                    builder.store(builder.add(builder.load(sums[r][v]), product), sums[r][v])

        for r in range(ROWS):
            start = builder.add(cast(c_off_v), builder.mul(cast(ldc_v), ir.Constant(index, r)))
            for v in range(VECTORS):
                at = builder.gep(c_ptr, [builder.add(start, ir.Constant(index, LANES * v))])
                builder.store(builder.load(sums[r][v]), builder.bitcast(at, sums_type.as_pointer()), align=4)
        return context.get_dummy_value()

    return codegen


@_intrinsic
def dot_u8s8(
    typingctx: TypingContext, groups: Type, a: Type, a_off: Type, b: Type, b_off: Type, rows: Type, c: Type,
    c_off: Type, ldc: Type,
) -> tuple[Signature, Codegen]:  # fmt: skip
    """dot_u8s8(groups, a, a_off, b, b_off, rows, c, c_off, ldc): the ROWS x COLUMNS block over
    ``groups`` groups of UNIT_U8S8 steps, u8 activations x s8 weights (`vpmaddubsw`); a: int32,
    b: uint8, rows: int64, c: int32 1-D arrays. No bounds checks: the caller pads A's rows and
    keeps every read of B inside it."""
    return types.void(groups, a, a_off, b, b_off, rows, c, c_off, ldc), _codegen(True)


@_intrinsic
def dot_s16(
    typingctx: TypingContext, groups: Type, a: Type, a_off: Type, b: Type, b_off: Type, rows: Type, c: Type,
    c_off: Type, ldc: Type,
) -> tuple[Signature, Codegen]:  # fmt: skip
    """dot_u8s8 on int16 units of UNIT_S16 steps (`vpmaddwd`): exact for any 8-bit operands."""
    return types.void(groups, a, a_off, b, b_off, rows, c, c_off, ldc), _codegen(False)
