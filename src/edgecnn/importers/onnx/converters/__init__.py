"""ONNX converters, one module per op family (mirrors edgecnn.ops)."""

from edgecnn.importers.onnx.converters import (  # noqa: F401
    activation,
    conv,
    dense,
    elementwise,
    norm,
    pool,
    quant,
    reduce,
    resize,
    shape,
)
