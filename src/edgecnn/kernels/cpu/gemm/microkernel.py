"""The register-blocked GEMM micro-kernel, emitted as LLVM vector code from numba.

Why: numba's loops keep a block of running sums in memory (a local array is a heap allocation LLVM
cannot promote), so compiled GEMM loops ran far below the FMA units' rate. This intrinsic builds
the kernel directly in LLVM IR: ROWS x VECTORS accumulators of LANES floats held in registers for
the whole depth loop, one broadcast and VECTORS multiply-adds per row and step, marked contractible
so that LLVM emits fused multiply-adds where the CPU has them and a multiply and an add where it
does not (the llvm.fma intrinsic would become a library call per lane there).

The block's shape follows the vector registers numba compiles for. With AVX2, 6 x 16 (12
accumulators of 8 floats, 2 filter vectors, 1 broadcast) fits its 16 registers; LLVM splits the
8-float vectors in two on 128-bit NEON. With AVX-512, 8 x 32 (16 accumulators of 16 floats) uses
half of its 32 registers and doubles the multiply-adds per instruction.

C[r, j] (+)= sum_k A[a_off + k*ROWS + r] * B[b_off + k*ldb + j] for r < ROWS, j < COLUMNS: A is a
packed panel (depth-major, ROWS values per step), B any row-major matrix with row stride ``ldb``.

Over 400 lines on purpose: one LLVM IR generator (``_codegen``) and the intrinsics that are its
variants; they change together.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any, Concatenate, TypeAlias, cast

from llvmlite import ir
from numba import types
from numba.core import cgutils, config
from numba.core.base import BaseContext
from numba.core.codegen import get_host_cpu_features
from numba.core.types import Type
from numba.core.typing import Signature
from numba.core.typing.context import BaseContext as TypingContext
from numba.extending import intrinsic


def target_features() -> set[str]:
    """The CPU features numba compiles for (NUMBA_CPU_FEATURES where set, else the host's), as
    "+name" entries: the same features as the key of numba's on-disk cache."""
    # set from the environment at numba's start-up, so absent from what mypy reads of numba.config
    chosen: str | None = config.CPU_FEATURES  # type: ignore[attr-defined]
    features = chosen if chosen is not None else get_host_cpu_features()
    return set(features.split(","))


def wide_vectors() -> bool:
    """Whether numba compiles for a CPU with 512-bit vectors (AVX-512F), so that the block shape
    always matches the code in numba's on-disk cache."""
    return "+avx512f" in target_features()


WIDE = wide_vectors()

ROWS = 8 if WIDE else 6
"""Rows of C per call (broadcast from the packed panel)."""

SHORT_ROWS = (ROWS // 3, 2 * ROWS // 3)
"""Row counts with a depth loop of their own, for blocks cut by C's last rows."""

LANES = 16 if WIDE else 8
"""Floats per vector: 32 registers of 16 on AVX-512, 16 registers of 8 on AVX2 (LLVM splits them
into 4-float registers on SSE and NEON)."""

VECTORS = 2
COLUMNS = LANES * VECTORS
"""Columns of C per call: two vectors."""

Codegen: TypeAlias = Callable[[BaseContext, ir.IRBuilder, Signature, Sequence[ir.Value]], ir.Value]
"""An intrinsic's code generator: the LLVM code of one call, from its arguments' values."""

Typer: TypeAlias = Callable[Concatenate[TypingContext, ...], tuple[Signature, Codegen]]
"""An intrinsic's typing function: the numba types of a call's arguments -> its signature and code."""


def _intrinsic(typer: Typer) -> Callable[..., None]:
    """numba's ``intrinsic``, typed as compiled code calls the result: with values where the typer
    takes their numba types, and without ``typingctx`` (which numba's stubs keep in the call)."""
    return cast("Callable[..., None]", intrinsic(typer))


def _c_offset(builder: ir.IRBuilder, c_off: ir.Value, ldc: ir.Value, row: int, column: int) -> ir.Value:
    index = c_off.type
    return builder.add(
        c_off, builder.add(builder.mul(ldc, ir.Constant(index, row)), ir.Constant(index, column))
    )


def _vector_pointer(
    builder: ir.IRBuilder, base: ir.Value, index: ir.Value, vector: ir.VectorType
) -> ir.Value:
    return builder.bitcast(builder.gep(base, [index]), vector.as_pointer())


def _transpose_stages(builder: ir.IRBuilder, rows: list[ir.Value]) -> list[tuple[ir.Value, list[int]]]:
    """ROWS vectors of LANES values (row r, column l) -> vectors that each hold whole columns: for
    each, the value and its columns, column k's ROWS values (rows in order) at lanes k*ROWS on.

    Where ROWS is a power of two that divides LANES: log2(ROWS) rounds of two-vector shuffles (rows r
    and r + ROWS/2 first, each round halving a vector's columns and doubling its rows), 24 for
    8 x 16, each one instruction with AVX-512 (vpermt2ps). Else (6 x 8 with AVX2) one column at a
    time from single values, which LLVM turns into shuffles as best it can."""
    labelled = [(value, [(r, lane) for lane in range(LANES)]) for r, value in enumerate(rows)]
    if ROWS & (ROWS - 1) or LANES % ROWS:
        zero = ir.Constant(ir.VectorType(ir.FloatType(), ROWS), None)
        single_columns = []
        for lane in range(LANES):
            column = zero
            for r, value in enumerate(rows):
                item = builder.extract_element(value, ir.Constant(ir.IntType(32), lane))
                column = builder.insert_element(column, item, ir.Constant(ir.IntType(32), r))
            single_columns.append((column, [lane]))
        return single_columns
    shift = ROWS // 2
    while shift >= 1:
        merged: list[tuple[ir.Value, list[tuple[int, int]]]] = []
        used: set[int] = set()
        for i, (first, first_labels) in enumerate(labelled):
            first_rows = sorted({r for r, _ in first_labels})
            columns = sorted({c for _, c in first_labels})
            partner = next(
                (
                    j
                    for j, (_, labels) in enumerate(labelled)
                    if j not in used
                    and sorted({r for r, _ in labels}) == [r + shift for r in first_rows]
                    and sorted({c for _, c in labels}) == columns
                ),
                None,
            )
            if i in used or partner is None:
                continue
            used |= {i, partner}
            second, second_labels = labelled[partner]
            merged_rows = sorted(first_rows + [r + shift for r in first_rows])
            source = first_labels + second_labels
            half = len(columns) // 2
            for part in (columns[:half], columns[half:]):
                labels = [(r, c) for c in part for r in merged_rows]
                mask = ir.Constant(ir.VectorType(ir.IntType(32), LANES), [source.index(x) for x in labels])
                merged.append((builder.shuffle_vector(first, second, mask), labels))
        assert len(used) == len(labelled)
        labelled = merged
        shift //= 2
    return [(value, sorted({c for _, c in labels})) for value, labels in labelled]


def _codegen(
    offsets: bool,
    strided_a: bool = False,
    finishing: bool = False,
    column_a: bool = False,
    tap_a: bool = False,
    transposed: bool = False,
    residual: bool = False,
    prefetching: bool = False,
) -> Codegen:
    """The kernel's LLVM code: B's row k at b_off + k*ldb, or at b_off + offsets[k] (``offsets``);
    A packed (A[r, k] at a_off + k*ROWS + r), row-major (``strided_a``: at a_off + r*lda + k,
    with ``lda`` the argument after a_off), column-major (``column_a``: at a_off + k*lda + r) or
    one run per tap (``tap_a``: at a_off + taps[k] + r, ``taps`` the argument after a_off); with
    ``finishing``, five more arguments (bias, bias_off, kind, low, high) and every value stored gets
    its row's bias added, then ReLU (kind 1) or the clip to [low, high] (kind 3); any other kind:
    none. ``transposed`` (with ``finishing``): C[r, j] stored at c_off + j*ldc + r, finished with
    column j's bias, one ROWS-value vector per column; ``accumulate`` is ignored (always stored).
    ``residual`` (with ``transposed``): two more arguments, an array z shaped like C's target and a
    flag; where the flag is set, z's value at each stored position is added before the activation.
    With ``column_a``, a block of fewer than ROWS rows reads its last row again in place of the rows
    past it, so that no read leaves the rows it stores (A may end with the array).
    ``prefetching`` (after the residual's arguments): two more, ``ahead`` and ``ahead_step``; step k
    asks for the cache line of b[ahead + k*ahead_step] to be brought into L2 (a panel of weights
    the caller will read next, spread over the blocks that read this one)."""

    def codegen(
        context: BaseContext, builder: ir.IRBuilder, sig: Signature, arguments: Sequence[ir.Value]
    ) -> ir.Value:
        args, types_ = list(arguments), list(sig.args)
        in_place_a = strided_a or column_a or tap_a
        lda_v = args.pop(3) if in_place_a else None
        lda_type = types_.pop(3) if in_place_a else None
        taps_ptr = context.make_array(lda_type)(context, builder, lda_v).data if tap_a else None
        finish_v = args[12:]  # with ``finishing``: its five arguments, then the residual's and prefetch's
        depth_v, a_v, a_off_v, b_v, b_off_v, ldb_v, c_v, c_off_v, ldc_v, accumulate_v, count_v, width_v = (
            args[:12]
        )
        vector = ir.VectorType(ir.FloatType(), LANES)
        index = a_off_v.type
        a_ptr = context.make_array(types_[1])(context, builder, a_v).data
        b_ptr = context.make_array(types_[3])(context, builder, b_v).data
        c_ptr = context.make_array(types_[6])(context, builder, c_v).data
        rows_ptr = context.make_array(types_[5])(context, builder, ldb_v).data if offsets else None
        zero = ir.Constant(vector, None)
        splat = ir.Constant(ir.VectorType(ir.IntType(32), LANES), None)
        sums = [[cgutils.alloca_once_value(builder, zero) for _ in range(VECTORS)] for _ in range(ROWS)]

        def depth_loop(rows: int, clamped: bool = False) -> None:
            """The multiply-adds of the first ``rows`` rows (the others keep their zeros); where
            ``clamped``, rows from ``count`` on read row count - 1 instead of their own."""
            count = builder.sext(count_v, index) if count_v.type != index else count_v
            last_row = builder.sub(count, ir.Constant(index, 1))
            row_of = [
                builder.select(
                    builder.icmp_signed("<", ir.Constant(index, r), last_row), ir.Constant(index, r), last_row
                )
                if clamped and r > 0
                else ir.Constant(index, r)
                for r in range(rows)
            ]
            with cgutils.for_range(builder, depth_v) as loop:
                k = builder.sext(loop.index, index) if loop.index.type != index else loop.index
                if prefetching:
                    ahead, ahead_step = finish_v[7:9]
                    _prefetch(
                        builder, builder.gep(b_ptr, [builder.add(ahead, builder.mul(k, ahead_step))]), 2
                    )
                if offsets:
                    b_row = builder.add(b_off_v, builder.load(builder.gep(rows_ptr, [k])))
                else:
                    b_row = builder.add(b_off_v, builder.mul(k, ldb_v))
                columns = [
                    builder.load(
                        _vector_pointer(
                            builder, b_ptr, builder.add(b_row, ir.Constant(index, v * LANES)), vector
                        ),
                        align=4,
                    )
                    for v in range(VECTORS)
                ]
                tap_at = builder.add(a_off_v, builder.load(builder.gep(taps_ptr, [k]))) if tap_a else None
                for r in range(rows):
                    if tap_a:
                        a_at = builder.add(tap_at, ir.Constant(index, r))
                    elif strided_a:
                        a_at = builder.add(builder.add(a_off_v, builder.mul(lda_v, ir.Constant(index, r))), k)
                    else:
                        step = lda_v if column_a else ir.Constant(index, ROWS)
                        a_at = builder.add(builder.add(a_off_v, builder.mul(k, step)), row_of[r])
                    value = builder.load(builder.gep(a_ptr, [a_at]))
                    single = builder.insert_element(zero, value, ir.Constant(ir.IntType(32), 0))
                    broadcast = builder.shuffle_vector(single, single, splat)
                    for v in range(VECTORS):
                        product = builder.fmul(broadcast, columns[v], flags=("contract",))
                        total = builder.fadd(product, builder.load(sums[r][v]), flags=("contract",))
                        builder.store(total, sums[r][v])

        # A block cut by C's last rows skips the multiply-adds of the rows it does not store: with
        # 16 or 32 output channels (6 + 6 + 4, 5 x 6 + 2) a sixth of a layer's work was thrown away.
        few = builder.icmp_signed("<=", count_v, ir.Constant(count_v.type, SHORT_ROWS[0]))
        some = builder.icmp_signed("<=", count_v, ir.Constant(count_v.type, SHORT_ROWS[1]))
        cut_block = builder.icmp_signed("<", count_v, ir.Constant(count_v.type, ROWS))
        with builder.if_else(few) as (short, longer):
            with short:
                depth_loop(SHORT_ROWS[0], clamped=column_a)
            with longer, builder.if_else(some) as (middle, rest):
                with middle:
                    depth_loop(SHORT_ROWS[1], clamped=column_a)
                with rest:
                    if column_a:
                        with builder.if_else(cut_block) as (cut, full):
                            with cut:
                                depth_loop(ROWS, clamped=True)
                            with full:
                                depth_loop(ROWS)
                    else:
                        depth_loop(ROWS)
        add = builder.icmp_unsigned("!=", accumulate_v, ir.Constant(accumulate_v.type, 0))
        full_width = builder.icmp_signed("==", width_v, ir.Constant(width_v.type, COLUMNS))

        if residual:
            z_ptr = context.make_array(types_[17])(context, builder, finish_v[5]).data
            has_z = builder.icmp_unsigned("!=", finish_v[6], ir.Constant(finish_v[6].type, 0))
            z_slot = cgutils.alloca_once(builder, ir.VectorType(ir.FloatType(), ROWS))
        if finishing:
            bias_ptr = context.make_array(types_[12])(context, builder, finish_v[0]).data
            kind = finish_v[2]
            relu = builder.icmp_signed("==", kind, ir.Constant(kind.type, 1))
            clip = builder.icmp_signed("==", kind, ir.Constant(kind.type, 3))
            low, high = (
                builder.fptrunc(v, ir.FloatType()) if isinstance(v.type, ir.DoubleType) else v
                for v in finish_v[3:5]
            )

        def residual_at(at: ir.Value) -> ir.Value:
            """z's ROWS values from ``at`` (those from ``count`` on: zero), read only where asked."""
            row_vector = ir.VectorType(ir.FloatType(), ROWS)
            builder.store(ir.Constant(row_vector, None), z_slot)
            whole_block = builder.icmp_signed("==", count_v, ir.Constant(count_v.type, ROWS))
            with builder.if_then(has_z), builder.if_else(whole_block) as (whole, cut):
                with whole:
                    builder.store(
                        builder.load(_vector_pointer(builder, z_ptr, at, row_vector), align=4), z_slot
                    )
                with cut:
                    for r in range(ROWS):
                        with builder.if_then(builder.icmp_signed(">", count_v, ir.Constant(count_v.type, r))):
                            item = builder.load(builder.gep(z_ptr, [builder.add(at, ir.Constant(index, r))]))
                            lane = ir.Constant(ir.IntType(32), r)
                            builder.store(builder.insert_element(builder.load(z_slot), item, lane), z_slot)
            return builder.load(z_slot)

        def store_columns(finish: Any) -> None:
            """Column j of the block, finished with bias[bias_off + j], to c_off + j*ldc: whole
            where all ROWS rows count, else value by value; columns from ``width`` on not at all."""
            whole_block = builder.icmp_signed("==", count_v, ir.Constant(count_v.type, ROWS))
            row_vector = ir.VectorType(ir.FloatType(), ROWS)
            for v in range(VECTORS):
                held = _transpose_stages(builder, [builder.load(sums[r][v]) for r in range(ROWS)])
                for value, columns in held:
                    for k, lane in enumerate(columns):
                        j = v * LANES + lane
                        if len(columns) == 1:
                            column = value
                        else:
                            mask = ir.Constant(
                                ir.VectorType(ir.IntType(32), ROWS), list(range(k * ROWS, (k + 1) * ROWS))
                            )
                            column = builder.shuffle_vector(value, value, mask)
                        inside = builder.icmp_signed(">", width_v, ir.Constant(width_v.type, j))
                        with builder.if_then(inside):
                            at = builder.add(c_off_v, builder.mul(ldc_v, ir.Constant(index, j)))
                            if residual:
                                column = builder.select(has_z, builder.fadd(column, residual_at(at)), column)
                            column = finish(column, j)
                            with builder.if_else(whole_block) as (whole, cut):
                                with whole:
                                    builder.store(
                                        column, _vector_pointer(builder, c_ptr, at, row_vector), align=4
                                    )
                                with cut:
                                    for r in range(ROWS):
                                        below = builder.icmp_signed(
                                            ">", count_v, ir.Constant(count_v.type, r)
                                        )
                                        with builder.if_then(below):
                                            item = builder.extract_element(
                                                column, ir.Constant(ir.IntType(32), r)
                                            )
                                            target = builder.gep(
                                                c_ptr, [builder.add(at, ir.Constant(index, r))]
                                            )
                                            builder.store(item, target, align=4)

        def splat_of(scalar: ir.Value, like: ir.Value) -> ir.Value:
            if not isinstance(like.type, ir.VectorType):
                return scalar
            single = builder.insert_element(
                ir.Constant(like.type, None), scalar, ir.Constant(ir.IntType(32), 0)
            )
            lanes = ir.Constant(ir.VectorType(ir.IntType(32), like.type.count), None)
            return builder.shuffle_vector(single, single, lanes)

        def finish(value: ir.Value, row: int) -> ir.Value:
            """The row's bias added, then ReLU or the clip where asked. NaN stays NaN in both, as in
            epilogue.activate: the comparisons are ordered, so a NaN keeps its value."""
            if not finishing:
                return value
            at = builder.add(finish_v[1], ir.Constant(finish_v[1].type, row))
            value = builder.fadd(value, splat_of(builder.load(builder.gep(bias_ptr, [at])), value))
            floor = splat_of(builder.select(clip, low, ir.Constant(ir.FloatType(), 0.0)), value)
            raised = builder.select(builder.fcmp_ordered("<=", value, floor), floor, value)
            ceiling = splat_of(high, value)
            lowered = builder.select(builder.fcmp_ordered(">", raised, ceiling), ceiling, raised)
            bounded = builder.select(clip, lowered, raised)
            return builder.select(builder.or_(relu, clip), bounded, value)

        if transposed:
            store_columns(finish)
            return context.get_dummy_value()

        def store(target: ir.Value, value: ir.Value, adding: bool, align: int, row: int) -> None:
            if adding:
                value = builder.fadd(builder.load(target, align=align), value)
            builder.store(finish(value, row), target, align=align)

        def store_rows(adding: bool) -> None:
            """Rows below ``count``: whole vectors where the block is ``width`` wide, else one guarded
            store per value (only the last run of an output row is cut)."""
            for r in range(ROWS):
                below = builder.icmp_signed(">", count_v, ir.Constant(count_v.type, r))
                with builder.if_then(below), builder.if_else(full_width) as (whole, cut):
                    with whole:
                        for v in range(VECTORS):
                            offset = _c_offset(builder, c_off_v, ldc_v, r, v * LANES)
                            target = _vector_pointer(builder, c_ptr, offset, vector)
                            store(target, builder.load(sums[r][v]), adding, 4, r)
                    with cut:
                        # stored as they are, each vector is finished once, before its values go out
                        vectors = [builder.load(sums[r][v]) for v in range(VECTORS)]
                        if not adding:
                            vectors = [finish(v, r) for v in vectors]
                        for j in range(COLUMNS):
                            inside = builder.icmp_signed(">", width_v, ir.Constant(width_v.type, j))
                            with builder.if_then(inside):
                                target = builder.gep(c_ptr, [_c_offset(builder, c_off_v, ldc_v, r, j)])
                                value = builder.extract_element(
                                    vectors[j // LANES], ir.Constant(ir.IntType(32), j % LANES)
                                )
                                if adding:
                                    store(target, value, adding, 4, r)
                                else:
                                    builder.store(value, target, align=4)

        with builder.if_else(add) as (adding, storing):
            with adding:
                store_rows(True)
            with storing:
                store_rows(False)
        return context.get_dummy_value()

    return codegen


@_intrinsic
def micro_kernel(
    typingctx: TypingContext, depth: Type, a: Type, a_off: Type, b: Type, b_off: Type, ldb: Type, c: Type,
    c_off: Type, ldc: Type, accumulate: Type, count: Type, width: Type,
) -> tuple[Signature, Codegen]:  # fmt: skip
    """micro_kernel(depth, a, a_off, b, b_off, ldb, c, c_off, ldc, accumulate, count, width): one
    ROWS x COLUMNS block of C = A @ B over ``depth`` steps, added to C if ``accumulate`` else stored;
    only its first ``count`` rows and ``width`` columns are written (a block cut by C's edge is
    still computed whole: A's padding rows are zeros, B's columns past the edge must be readable).
    a, b, c are 1-D float32 arrays; offsets and strides count floats. No bounds checks: the
    caller's loops guarantee every index is inside its array."""
    signature = types.void(depth, a, a_off, b, b_off, ldb, c, c_off, ldc, accumulate, count, width)
    return signature, _codegen(False)


@_intrinsic
def micro_kernel_rows(
    typingctx: TypingContext, depth: Type, a: Type, a_off: Type, b: Type, b_off: Type, rows: Type, c: Type,
    c_off: Type, ldc: Type, accumulate: Type, count: Type, width: Type,
) -> tuple[Signature, Codegen]:  # fmt: skip
    """micro_kernel with B's row k at b[b_off + rows[k]] (``rows``: 1-D int64 array): a convolution
    reads its taps straight from the (padded) image, each tap's run of COLUMNS output pixels
    one contiguous run, without an im2col matrix (conv/direct.py)."""
    signature = types.void(depth, a, a_off, b, b_off, rows, c, c_off, ldc, accumulate, count, width)
    return signature, _codegen(True)


def _variant(
    name: str, doc: str, arguments: int, offsets: bool = False, **flavour: bool
) -> Callable[..., None]:
    """An intrinsic of ``arguments`` arguments whose code is ``_codegen(offsets, **flavour)``: the
    variants that take more than micro_kernel's twelve (see ``_codegen`` for what they add)."""

    def typer(typingctx: TypingContext, *args: Type) -> tuple[Signature, Codegen]:
        return types.void(*args), _codegen(offsets, **flavour)

    # numba reads the arity from the signature (``*args`` would reach the code as one tuple)
    positional = inspect.Parameter.POSITIONAL_OR_KEYWORD
    names = ["typingctx", *(f"arg{i}" for i in range(arguments))]
    # typeshed's FunctionType has no __signature__, the attribute inspect.signature reads first
    typer.__signature__ = inspect.Signature([inspect.Parameter(n, positional) for n in names])  # type: ignore[attr-defined]
    typer.__name__ = typer.__qualname__ = name
    typer.__doc__ = doc
    return _intrinsic(typer)


def _finishing(offsets: bool, name: str, doc: str) -> Callable[..., None]:
    """The intrinsic of micro_kernel (``offsets`` False) or micro_kernel_rows (True) with five more
    arguments after ``width``: bias, bias_off, kind, low, high (see ``_codegen``)."""
    return _variant(name, doc, 17, offsets, finishing=True)


micro_kernel_finished = _finishing(
    False,
    "micro_kernel_finished",
    """micro_kernel that also finishes the block, as micro_kernel_rows_finished does.""",
)

micro_kernel_rows_finished = _finishing(
    True,
    "micro_kernel_rows_finished",
    """micro_kernel_rows that also finishes the block: bias[bias_off + r] added to row r, then ReLU
    (kind 1) or the clip to [low, high] (kind 3), as the values are stored. For the last pass over
    the depth: the kernel then needs no separate epilogue pass over its output.""",
)


@_intrinsic
def micro_kernel_strided_a(
    typingctx: TypingContext, depth: Type, a: Type, a_off: Type, lda: Type, b: Type, b_off: Type, ldb: Type,
    c: Type, c_off: Type, ldc: Type, accumulate: Type, count: Type, width: Type,
) -> tuple[Signature, Codegen]:  # fmt: skip
    """micro_kernel with A read in place, row-major: A[r, k] at a[a_off + r*lda + k] (Winograd's
    transformed tiles, one row per tile, multiplied without packing them)."""
    signature = types.void(depth, a, a_off, lda, b, b_off, ldb, c, c_off, ldc, accumulate, count, width)
    return signature, _codegen(False, strided_a=True)


@_intrinsic
def micro_kernel_column_a(
    typingctx: TypingContext, depth: Type, a: Type, a_off: Type, lda: Type, b: Type, b_off: Type, ldb: Type,
    c: Type, c_off: Type, ldc: Type, accumulate: Type, count: Type, width: Type,
) -> tuple[Signature, Codegen]:  # fmt: skip
    """micro_kernel with A read in place, column-major: A[r, k] at a[a_off + k*lda + r] (an NCHW
    image as the pixels x channels matrix of a 1x1 layer, conv/pixel_rows.py). All ROWS rows are read
    for every k: the caller keeps a block cut by A's last row inside the array."""
    signature = types.void(depth, a, a_off, lda, b, b_off, ldb, c, c_off, ldc, accumulate, count, width)
    return signature, _codegen(False, column_a=True)


@_intrinsic
def micro_kernel_tap_a_transposed(
    typingctx: TypingContext, depth: Type, a: Type, a_off: Type, taps: Type, b: Type, b_off: Type, ldb: Type,
    c: Type, c_off: Type, ldc: Type, accumulate: Type, count: Type, width: Type, bias: Type, bias_off: Type,
    kind: Type, low: Type, high: Type,
) -> tuple[Signature, Codegen]:  # fmt: skip
    """A block of a direct convolution with output pixels as rows, read from the padded image and
    stored as NCHW: A[r, k] at a[a_off + taps[k] + r] (``taps``: 1-D int64 array; ROWS consecutive
    output pixels of a row as its rows, whatever ``count`` is: the caller's image must reach that
    far), finished (bias[bias_off + j] added to column j, then ReLU or the clip, as in
    micro_kernel_finished) and stored transposed: C[r, j] at c[c_off + j*ldc + r], so the pixels of
    one output channel go out as one vector (ldc: the output's plane size). ``accumulate`` is
    ignored: the block is always stored (conv_direct_rows.py)."""
    arguments = (depth, a, a_off, taps, b, b_off, ldb, c, c_off, ldc, accumulate, count, width)
    signature = types.void(*arguments, bias, bias_off, kind, low, high)
    return signature, _codegen(False, finishing=True, tap_a=True, transposed=True)


def _finished_transposed(column_a: bool, name: str, doc: str) -> Callable[..., None]:
    """The intrinsic of micro_kernel_column_a (``column_a``) or micro_kernel_strided_a, finished
    and stored transposed as micro_kernel_tap_a_transposed, with the residual and prefetch
    arguments."""
    flavour = {"column_a": True} if column_a else {"strided_a": True}
    return _variant(
        name, doc, 22, finishing=True, transposed=True, residual=True, prefetching=True, **flavour
    )


micro_kernel_column_a_transposed = _finished_transposed(
    True,
    "micro_kernel_column_a_transposed",
    """micro_kernel_column_a whose block goes straight to an NCHW output: C[r, j] + bias[bias_off + j]
    (+ residual[c_off + j*ldc + r] where ``has_residual``), then ReLU or the clip (kind 1, 3), stored
    at c[c_off + j*ldc + r] (conv/pixel_rows.py: no C block, no pass to transpose it).""",
)

micro_kernel_strided_a_transposed = _finished_transposed(
    False,
    "micro_kernel_strided_a_transposed",
    """micro_kernel_strided_a finished and stored as micro_kernel_column_a_transposed does.""",
)


LINE = 16
"""Floats per 64-byte cache line."""


def _prefetch(builder: ir.IRBuilder, pointer: ir.Value, locality: int) -> None:
    """A read prefetch of ``pointer``'s line into the data caches: locality 3 to L1 (x86
    prefetcht0), 2 to L2 (prefetcht1)."""
    i32 = ir.IntType(32)
    signature = ir.FunctionType(ir.VoidType(), [pointer.type, i32, i32, i32])
    function = cgutils.get_or_insert_function(builder.module, signature, "llvm.prefetch.p0")
    builder.call(function, [pointer, ir.Constant(i32, 0), ir.Constant(i32, locality), ir.Constant(i32, 1)])


@_intrinsic
def prefetch(typingctx: TypingContext, array: Type, index: Type) -> tuple[Signature, Codegen]:
    """prefetch(array, index): asks the CPU to bring the cache line of array[index] into L1 ahead of
    its use (x86 prefetcht0; a no-op where the target has no such instruction). For reads whose
    addresses the hardware prefetchers cannot guess: short runs of rows a plane apart."""

    def codegen(
        context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]
    ) -> ir.Value:
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        _prefetch(builder, builder.gep(data, [args[1]]), 3)
        return context.get_dummy_value()

    return types.void(array, index), codegen
