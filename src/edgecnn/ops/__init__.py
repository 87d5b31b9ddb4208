"""Operator semantics, one module per family. Importing this package registers them all."""

from edgecnn.ops import (  # noqa: F401
    activation,
    conv,
    dense,
    elementwise,
    fused,
    fused_pool,
    norm,
    pool,
    quant,
    reduce,
    resize,
    shape,
)
from edgecnn.ops.registry import NoAttrs, OpDef, get_op, known_ops, register_op

__all__ = ["NoAttrs", "OpDef", "get_op", "known_ops", "register_op"]
