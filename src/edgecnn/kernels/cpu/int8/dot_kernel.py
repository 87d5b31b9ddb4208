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

Two depth loops, chosen per layer (two intrinsics):

- ``dot_u8s8``: B as unsigned bytes, A as signed bytes; `vpmaddubsw` sums two u8 x s8 products into
  int16, `vpmaddwd` by ones sums those pairs into int32. The int16 sum saturates when both products
  are large and of one sign: it is exact when every pair of weights (steps 2i, 2i+1 of a row) has
  its positive parts and its negative parts each summing to at most 128 in magnitude (then
  255 * 128 < 2**15), as 7-bit weights (onnxruntime's ``reduce_range``) always do. Full-range
  weights are split (``split_pairs``): each pair that could saturate is halved into the main
  weights (w >> 1, in [-64, 63]) and a fix-up (w - (w >> 1), in [-64, 64]); both halves fit the
  bound, so the sum of the two products is exact for every u8 and s8 value. The fix-ups are sparse
  (trained layers have a few large weights: a pair of them in some 1 to 8% of pairs, a fix-up in
  5 to 50% of a panel's groups), so each panel lists the groups where it has any (``FixUps``) and
  a second depth loop adds just those into the same accumulators. Splitting activations instead
  (a = (a & 127) + (a & 128)) needs a second `vpmaddubsw` and `vpmaddwd` for every group, twice
  the multiplies of the int16 loop.
- ``dot_s16``: B and A as int16; `vpmaddwd` sums two int16 products into int32, exact for any 8-bit
  values, with twice the activation bytes and loop trips of the u8 x s8 loop and 4 vector operations
  per 4 steps where it has 3. A layer takes it where fix-ups would be in more than FIX_LIMIT of its
  panel groups.

Where numba compiles for a CPU with AVX-VNNI or AVX-512 VNNI (``VNNI``), the u8 x s8 loop is
`vpdpbusd` instead: four u8 x s8 products summed into int32 in one instruction, exact for any
weights, so every layer takes it, unsplit and without fix-ups.

Numba must compile for AVX2 (``available()``): these intrinsics have no other lowering.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

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


LOOP_OPS = 4
"""Scalar instructions of one depth-loop trip: the tap's load and add, the count and the branch."""


def trip_ops(products: int) -> int:
    """Instructions of one depth-loop trip of the block whose products take ``products`` vector
    instructions each: the loop's, VECTORS activation loads, ROWS broadcasts, the products."""
    return LOOP_OPS + VECTORS + ROWS + products * ROWS * VECTORS


FIX_LIMIT = 2 * trip_ops(2) / trip_ops(3) - 1
"""The largest share of a layer's panel groups with fix-ups at which the u8 x s8 loop still runs
fewer instructions than the int16 one: a group of 4 steps is one trip of the u8 x s8 loop (3
instructions a product: `vpmaddubsw`, `vpmaddwd`, add) and a fix-up group one more, against two
trips of the int16 loop (2 a product: `vpmaddwd`, add). About a half for AVX2's 4 x 2 block."""


class FixUps(NamedTuple):
    """The fix-up groups of each panel (``bytes_split``): panel p's are starts[p]..starts[p+1]-1,
    group i's ROWS weight units at units[i*ROWS + r] (int32 of 4 bytes, as the panels), its
    activations at byte offset taps[i] (the group's entry of the main loop's ``rows``)."""

    starts: np.ndarray
    units: np.ndarray
    taps: np.ndarray


def _saturating_pairs(weights: np.ndarray) -> np.ndarray:
    """(rows, pairs) bool: the pairs of steps (2i, 2i+1) of each row whose positive weights, or the
    magnitudes of whose negative ones, sum to more than PAIR_LIMIT (an odd depth's last step
    pairs with a zero)."""
    w = weights.astype(np.int32)
    if w.shape[1] % 2:
        w = np.pad(w, ((0, 0), (0, 1)))
    pairs = w.reshape(w.shape[0], -1, 2)
    over = (np.maximum(pairs, 0).sum(axis=2) > PAIR_LIMIT) | (np.maximum(-pairs, 0).sum(axis=2) > PAIR_LIMIT)
    return np.asarray(over, dtype=bool)


def pairs_fit_int16(weights: np.ndarray) -> bool:
    """Whether `vpmaddubsw` is exact for these (rows, depth) int8 weights and any u8 activations:
    in each pair of steps (2i, 2i+1) of a row, positive weights sum to at most PAIR_LIMIT, and so
    do the magnitudes of negative ones."""
    return not _saturating_pairs(weights).any()


def split_pairs(weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(main, fix) int8 with main + fix == weights and every pair of both within the bound: the
    pairs that could saturate halved, main = w >> 1 in [-64, 63] and fix = w - main in [-64, 64]
    (64 + 64 = PAIR_LIMIT); the others whole in main, fix 0."""
    halve = np.repeat(_saturating_pairs(weights), 2, axis=1)[:, : weights.shape[1]]
    main = np.where(halve, weights >> 1, weights).astype(np.int8)
    return main, (weights.astype(np.int16) - main).astype(np.int8)


def _fixed_groups(fix: np.ndarray) -> np.ndarray:
    """(panels, groups) bool: the panel groups (ROWS rows x UNIT_U8S8 steps) where ``fix`` has a
    nonzero weight."""
    rows, depth = fix.shape
    panels, groups = -(-rows // ROWS), -(-depth // UNIT_U8S8)
    nonzero = np.zeros((panels * ROWS, groups * UNIT_U8S8), dtype=bool)
    nonzero[:rows, :depth] = fix != 0
    return np.asarray(nonzero.reshape(panels, ROWS, groups, UNIT_U8S8).any(axis=(1, 3)), dtype=bool)


def bytes_split(weights: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The u8 x s8 loop's (main, fix) weights for these (rows, depth) int8 weights, or None where
    the int16 loop does less work (FIX_LIMIT). With VNNI all of them are main: `vpdpbusd` sums in
    int32 and cannot saturate."""
    if VNNI:
        return weights, np.zeros_like(weights)
    main, fix = split_pairs(weights)
    return (main, fix) if _fixed_groups(fix).mean() <= FIX_LIMIT else None


def fix_ups(fix: np.ndarray | None, rows: int, taps: np.ndarray) -> FixUps:
    """The fix-up groups of ``bytes_split``'s (rows, depth) ``fix`` weights, group g's activations
    at taps[g]; none for None (the int16 loop)."""
    panels = -(-rows // ROWS)
    if fix is None:
        return FixUps(np.zeros(panels + 1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int64))
    fixed = _fixed_groups(fix)
    panel, group = np.nonzero(fixed)  # panel-major: each panel's groups in depth order
    depth = fixed.shape[1] * UNIT_U8S8
    padded = np.zeros((panels * ROWS, depth), dtype=np.int8)
    padded[:rows, : fix.shape[1]] = fix
    steps = padded.reshape(panels, ROWS, -1, UNIT_U8S8)[panel, :, group]  # (fixes, ROWS, UNIT_U8S8)
    starts = np.concatenate([[0], np.cumsum(fixed.sum(axis=1))]).astype(np.int64)
    units = np.ascontiguousarray(steps).reshape(-1).view(np.int32)
    return FixUps(starts, units, np.ascontiguousarray(taps[group], dtype=np.int64))


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
    """The micro-kernel's LLVM code: ``bytes_mode`` = the u8 x s8 loop and its fix-up loop, else
    the int16 loop."""

    def codegen(
        context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]
    ) -> ir.Value:
        vectors_v, groups_v, _, a_off_v, _, b_off_v, _, _, c_off_v, ldc_v = args[:10]
        index = a_off_v.type
        i32, i16, i8 = ir.IntType(32), ir.IntType(16), ir.IntType(8)
        sums_type = ir.VectorType(i32, LANES)
        shorts = ir.VectorType(i16, 2 * LANES)
        octets = ir.VectorType(i8, 4 * LANES)

        def data(arg: int) -> ir.Value:
            return context.make_array(sig.args[arg])(context, builder, args[arg]).data

        a_ptr, b_ptr, rows_ptr, c_ptr = data(2), data(4), data(6), data(7)
        zero = ir.Constant(sums_type, None)
        ones = ir.Constant(shorts, [1] * (2 * LANES))
        splat = ir.Constant(ir.VectorType(i32, LANES), None)
        operand = octets if bytes_mode else shorts

        def cast(value: ir.Value) -> ir.Value:
            return builder.sext(value, index) if value.type != index else value

        def depth_loop(
            sums: list[list[ir.Value]], count: ir.Value, weights: ir.Value, w_start: ir.Value,
            taps: ir.Value, t_start: ir.Value,
        ) -> None:  # fmt: skip
            """Adds ``count`` groups to the accumulators: group g's ROWS units at weights[w_start +
            g*ROWS + r], its activations at b_off + taps[t_start + g]."""
            with cgutils.for_range(builder, count) as loop:
                g = cast(loop.index)
                tap = builder.load(builder.gep(taps, [builder.add(t_start, g)]))
                row = builder.add(cast(b_off_v), cast(tap))
                activations = []
                for v in range(len(sums[0])):
                    at = builder.gep(b_ptr, [builder.add(row, ir.Constant(index, 4 * LANES * v))])
                    activations.append(builder.load(builder.bitcast(at, operand.as_pointer()), align=1))
                panel = builder.add(w_start, builder.mul(g, ir.Constant(index, ROWS)))
                for r in range(ROWS):
                    unit = builder.load(builder.gep(weights, [builder.add(panel, ir.Constant(index, r))]))
                    single = builder.insert_element(zero, unit, ir.Constant(i32, 0))
                    units = builder.bitcast(builder.shuffle_vector(single, single, splat), operand)
                    for v, x in enumerate(activations):
                        if bytes_mode and VNNI:
                            words, quads = builder.bitcast(x, sums_type), builder.bitcast(units, sums_type)
                            total = _x86(builder, VPDPBUSD, sums_type, builder.load(sums[r][v]), words, quads)
                            builder.store(total, sums[r][v])
                            continue
                        if bytes_mode:
                            pairs = _x86(builder, PMADDUBSW, shorts, x, units)
                            product = _x86(builder, PMADDWD, sums_type, pairs, ones)
                        else:
                            product = _x86(builder, PMADDWD, sums_type, x, units)
                        builder.store(builder.add(builder.load(sums[r][v]), product), sums[r][v])

        def block(vectors: int) -> None:
            """The depth loops and the stores of a ROWS x ``vectors`` block."""
            sums = [[cgutils.alloca_once_value(builder, zero) for _ in range(vectors)] for _ in range(ROWS)]
            depth_loop(sums, groups_v, a_ptr, cast(a_off_v), rows_ptr, ir.Constant(index, 0))
            if bytes_mode:  # the fix-up groups (none with VNNI): the same accumulators
                fixes_v, fix_off_v = args[10], cast(args[13])
                at = builder.mul(fix_off_v, ir.Constant(index, ROWS))
                depth_loop(sums, fixes_v, data(11), at, data(12), fix_off_v)
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
    c_off: Type, ldc: Type, fixes: Type, fix_a: Type, fix_rows: Type, fix_off: Type,
) -> tuple[Signature, Codegen]:  # fmt: skip
    """dot_u8s8(vectors, groups, a, a_off, b, b_off, rows, c, c_off, ldc, fixes, fix_a, fix_rows,
    fix_off): the ROWS x (LANES * vectors) block (1 <= vectors <= VECTORS; a block's last pixels)
    over ``groups`` groups of UNIT_U8S8 steps, u8 activations x s8 weights, then over ``fixes``
    fix-up groups from index ``fix_off`` of ``fix_a`` / ``fix_rows`` (FixUps; 0 with VNNI); a,
    fix_a: int32, b: uint8, rows, fix_rows: int64, c: int32 1-D arrays. No bounds checks: the
    caller pads A's rows and keeps every read of B inside it."""
    signature = types.void(
        vectors, groups, a, a_off, b, b_off, rows, c, c_off, ldc, fixes, fix_a, fix_rows, fix_off
    )
    return signature, _codegen(True)


@_intrinsic
def dot_s16(
    typingctx: TypingContext, vectors: Type, groups: Type, a: Type, a_off: Type, b: Type, b_off: Type, rows: Type, c: Type,
    c_off: Type, ldc: Type,
) -> tuple[Signature, Codegen]:  # fmt: skip
    """dot_u8s8's first ten arguments on int16 units of UNIT_S16 steps (`vpmaddwd`), no fix-ups:
    exact for any 8-bit operands."""
    return types.void(vectors, groups, a, a_off, b, b_off, rows, c, c_off, ldc), _codegen(False)
