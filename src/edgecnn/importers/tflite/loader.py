"""Turn a decoded TFLite model into a Graph: check every operator first, then convert them in
file order (TFLite stores operators in execution order)."""

from __future__ import annotations

import os

from edgecnn.errors import ModelFormatError, UnsupportedOperatorError
from edgecnn.importers.tflite.builder import NCHW, NHWC, ConversionError, GraphBuilder
from edgecnn.importers.tflite.reader import DAMAGE, TfliteModel, read_tflite
from edgecnn.ir.graph import Graph, TensorSpec
from edgecnn.limits import MemoryBudget


def load_tflite(path: str | os.PathLike[str], budget: MemoryBudget | None = None) -> Graph:
    """Read ``path`` into a Graph whose tensors carry TFLite's tensor names."""
    source = os.fspath(path)
    return graph_from_tflite(read_tflite(path, budget), source)


def graph_from_tflite(model: TfliteModel, source: str) -> Graph:
    from edgecnn.importers.tflite.converters import CONVERTERS

    unsupported = [(op.opcode, f"#{op.index}") for op in model.operators if op.opcode not in CONVERTERS]
    if unsupported:
        raise UnsupportedOperatorError(unsupported, source=source)
    b = GraphBuilder(model, source)
    for op in model.operators:
        b.current = f"{op.opcode}_{op.index}"
        try:
            CONVERTERS[op.opcode](b, op)
            for index in op.outputs:
                if index >= 0:
                    b.settle(index)
        except (ConversionError, KeyError, *DAMAGE) as exc:
            raise b.fail(op, str(exc)) from None
    try:
        outputs = [b.get(index, NHWC, real=False) for index in model.outputs]
    except ConversionError as exc:
        raise ModelFormatError(f"{source}: graph output: {exc}") from None
    inputs = [
        TensorSpec(b.names[i], model.tensors[i].dtype, b.dims(i))
        for i in model.inputs
        if model.tensors[i].data is None
    ]
    nchw = sorted(name for (_, layout, _), name in b.forms.items() if layout == NCHW)
    metadata = {
        "source_format": "tflite",
        "description": model.description,
        "tflite_nchw_tensors": ",".join(nchw),
        "tflite_signature_inputs": ",".join(f"{k}={b.names[v]}" for k, v in model.signature_inputs.items()),
        "tflite_signature_outputs": ",".join(f"{k}={b.names[v]}" for k, v in model.signature_outputs.items()),
    }
    return Graph(
        inputs=inputs,
        outputs=outputs,
        nodes=b.nodes,
        initializers=b.initializers,
        name=model.name or os.path.splitext(os.path.basename(source))[0],
        metadata=metadata,
    )
