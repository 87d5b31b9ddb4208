"""The float64 sum of a run of float32 values in vector code, for global average pooling.

numba's loop vectoriser sums four vectors of doubles per iteration and leaves the rest to a scalar
loop, one dependent add per value: most of a 7x7 plane (49 values) and all of a smaller one. Here
one vector of LANES floats is read per step, widened to doubles and added into LANES partial sums;
the last, partial vector is a masked read; the partial sums are added up once at the end."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.base import BaseContext
from numba.core.typing import Signature
from numba.extending import intrinsic

from edgecnn.kernels.cpu.gemm.microkernel import LANES


def _plane_sum_typer(
    typingctx: Any, values: types.Type, at: types.Type, count: types.Type
) -> tuple[Signature, Callable[..., ir.Value]] | None:
    """sum(values[at : at + count]) in float64, ``values`` a float32 array, offsets unsigned."""
    if not (isinstance(values, types.Array) and values.dtype == types.float32):
        return None
    if not (isinstance(at, types.Integer) and isinstance(count, types.Integer)):
        return None

    def codegen(
        context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]
    ) -> ir.Value:
        floats, doubles = ir.VectorType(ir.FloatType(), LANES), ir.VectorType(ir.DoubleType(), LANES)
        index = ir.IntType(64)
        word = ir.IntType(32)
        start = builder.zext(args[1], index) if args[1].type != index else args[1]
        total = builder.zext(args[2], index) if args[2].type != index else args[2]
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        lanes = ir.Constant(index, LANES)
        full = builder.sub(total, builder.urem(total, lanes))

        def vector_at(offset: ir.Value) -> ir.Value:
            return builder.bitcast(builder.gep(data, [builder.add(start, offset)]), floats.as_pointer())

        entry = builder.block
        loop = builder.append_basic_block("plane_sum.loop")
        body = builder.append_basic_block("plane_sum.body")
        rest = builder.append_basic_block("plane_sum.rest")
        builder.branch(loop)
        builder.position_at_end(loop)
        step = builder.phi(index)
        sums = builder.phi(doubles)
        step.add_incoming(ir.Constant(index, 0), entry)
        sums.add_incoming(ir.Constant(doubles, None), entry)
        builder.cbranch(builder.icmp_unsigned("<", step, full), body, rest)
        builder.position_at_end(body)
        widened = builder.fpext(builder.load(vector_at(step), align=4), doubles)
        step.add_incoming(builder.add(step, lanes), body)
        sums.add_incoming(builder.fadd(sums, widened), body)
        builder.branch(loop)
        builder.position_at_end(rest)
        left = builder.sub(total, full)
        single = builder.insert_element(
            ir.Constant(ir.VectorType(index, LANES), None), left, ir.Constant(word, 0)
        )
        every = ir.Constant(ir.VectorType(word, LANES), None)
        mask = builder.icmp_unsigned(
            "<",
            ir.Constant(ir.VectorType(index, LANES), list(range(LANES))),
            builder.shuffle_vector(single, single, every),
        )
        at_rest = vector_at(full)
        masked_load = cgutils.get_or_insert_function(
            builder.module,
            ir.FunctionType(floats, [at_rest.type, word, mask.type, floats]),
            f"llvm.masked.load.v{LANES}f32.p0",
        )
        tail = builder.call(masked_load, [at_rest, ir.Constant(word, 4), mask, ir.Constant(floats, None)])
        sums_all = builder.fadd(sums, builder.fpext(tail, doubles))
        reduce = cgutils.get_or_insert_function(
            builder.module,
            ir.FunctionType(ir.DoubleType(), [ir.DoubleType(), doubles]),
            f"llvm.vector.reduce.fadd.v{LANES}f64",
        )
        return builder.call(reduce, [ir.Constant(ir.DoubleType(), 0.0), sums_all], fastmath=("reassoc",))

    return types.float64(values, at, count), codegen


plane_sum = cast("Callable[[Any, Any, Any], float]", intrinsic(_plane_sum_typer))
