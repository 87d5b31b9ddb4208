"""Build one-node ONNX models and evaluate them with independent implementations
(onnx's reference evaluator and onnxruntime), for cross-checking edgecnn."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper


def node_model(
    op_type: str,
    inputs: Sequence[np.ndarray | None],
    attrs: dict[str, Any] | None = None,
    *,
    opset: int = 21,
    num_outputs: int = 1,
    constant_inputs: Sequence[int] = (),
) -> onnx.ModelProto:
    """A model with one node; ``None`` inputs are omitted, ``constant_inputs`` become initializers."""
    names = ["" if x is None else f"in{i}" for i, x in enumerate(inputs)]
    outputs = [f"out{i}" for i in range(num_outputs)]
    node = helper.make_node(op_type, names, outputs, name="node", **(attrs or {}))
    graph_inputs = [
        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)
        for i, (n, x) in enumerate(zip(names, inputs))
        if x is not None and i not in constant_inputs
    ]
    initializers = [numpy_helper.from_array(np.asarray(inputs[i]), names[i]) for i in constant_inputs]
    graph = helper.make_graph(
        [node], op_type, graph_inputs, [helper.make_empty_tensor_value_info(o) for o in outputs], initializers
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 10)
    return model


def feeds_of(model: onnx.ModelProto, inputs: Sequence[np.ndarray | None]) -> dict[str, np.ndarray]:
    declared = {vi.name for vi in model.graph.input}
    return {f"in{i}": x for i, x in enumerate(inputs) if x is not None and f"in{i}" in declared}


def run_onnx_reference(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    from onnx.reference import ReferenceEvaluator

    return [np.asarray(x) for x in ReferenceEvaluator(model).run(None, feeds)]


def run_onnxruntime(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)
