"""int8 (QDQ) models placed on OpenCL run as float32: each activation's QuantizeLinear ->
DequantizeLinear pair becomes a Clip to the range the pair can represent, before the graph passes;
the weights' DequantizeLinear (on constants) folds into float weights. The layers then run on the
float OpenCL kernels instead of the numpy reference of the 8-bit ops.

The Clip keeps what the pair does beyond rounding: quantize_static drops a Relu whose effect the
output range already has (a zero point at the bottom of the range), so the bound is the model's
activation. What is no longer done is rounding the activations to the 8-bit grid, so outputs
differ from the int8 reference by that rounding (docs/heterogeneous.md gives the measured
agreement)."""

from __future__ import annotations

import numpy as np

from edgecnn.ir.graph import Graph, Node
from edgecnn.ops.registry import NoAttrs
from edgecnn.passes.base import PassResult

_LIMITS = {np.dtype(np.uint8): (0, 255), np.dtype(np.int8): (-128, 127)}


def _parameters(graph: Graph, node: Node) -> tuple[float, int, np.dtype] | None:
    """(scale, zero point, 8-bit type) of a per-tensor QuantizeLinear or DequantizeLinear; None
    when its scale or zero point is not a constant scalar, or its type is not 8-bit."""
    scale = graph.initializers.get(node.inputs[1]) if len(node.inputs) > 1 else None
    zero = graph.initializers.get(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else None
    if scale is None or scale.size != 1 or (zero is not None and zero.size != 1):
        return None
    dtype = np.dtype(np.uint8) if zero is None else zero.dtype
    if dtype not in _LIMITS:
        return None
    return float(np.float32(scale.reshape(()))), 0 if zero is None else int(zero.reshape(())), dtype


def _range(scale: float, zero: int, dtype: np.dtype) -> tuple[np.float32, np.float32]:
    """The float values an 8-bit tensor of this scale and zero point represents, as float32."""
    low, high = _LIMITS[dtype]
    s, zp = np.float32(scale), np.float32(zero)
    return np.float32((low - zp) * s), np.float32((high - zp) * s)


def clip_activation_qdq(graph: Graph) -> PassResult:
    """Each DequantizeLinear reading a per-tensor QuantizeLinear of a float tensor with the same
    scale and zero point becomes a Clip of that tensor to the pair's range; a QuantizeLinear nothing reads any more is removed. A
    QuantizeLinear that is a graph output, or read by other ops, stays (its 8-bit output is what
    they read); DequantizeLinear of constants and of 8-bit graph inputs stay too."""
    quantized = {}
    for node in graph.nodes:
        if node.op == "QuantizeLinear" and node.inputs[0] not in graph.initializers:
            parameters = _parameters(graph, node)
            if parameters is not None:
                quantized[node.outputs[0]] = (node.inputs[0], parameters)
    kept: list[Node] = []
    initializers: dict[str, np.ndarray] = {}
    for node in graph.nodes:
        found = quantized.get(node.inputs[0]) if node.op == "DequantizeLinear" else None
        if found is None or _parameters(graph, node) != found[1]:
            kept.append(node)  # not a pair, or one that dequantises with other parameters
            continue
        source, parameters = found
        low, high = _range(*parameters)
        names = f"{node.outputs[0]}/clip_low", f"{node.outputs[0]}/clip_high"
        initializers.update(zip(names, (np.asarray(low), np.asarray(high))))
        kept.append(Node("Clip", node.name, [source, *names], list(node.outputs), NoAttrs()))
    if not initializers:
        return PassResult(graph)
    read = {x for node in kept for x in node.inputs} | set(graph.outputs)
    kept = [node for node in kept if node.op != "QuantizeLinear" or node.outputs[0] in read]
    result = graph.with_nodes(kept)
    result.initializers.update(initializers)
    return PassResult(
        result, [f"{len(initializers) // 2} activation QuantizeLinear/DequantizeLinear pairs as Clip"]
    )
