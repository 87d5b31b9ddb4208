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
    quant_residual,
    reduce,
    resize,
    shape,
)
from edgecnn.ops.registry import (
    FusableActivation,
    NoAttrs,
    OpDef,
    find_op,
    get_op,
    known_ops,
    op_family,
    register_op,
)

__all__ = [
    "FusableActivation",
    "NoAttrs",
    "OpDef",
    "find_op",
    "get_op",
    "known_ops",
    "op_family",
    "register_op",
]
