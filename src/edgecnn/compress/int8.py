"""The int8 rewrite: every Conv/FusedConv (2-D) and Gemm/FusedGemm with constant weights becomes
an Int8Conv/Int8Gemm that multiplies int8 by int8 into int32 (edgecnn.ops.quant).

- weights: symmetric, one scale per output channel (scale = max|w| / 127), stored as int8 in the
  graph, so the .ecnn file holds one byte per weight;
- bias: int32 in units of input scale x weight scale (added to the accumulator exactly);
- activations: asymmetric uint8 over the calibrated range (edgecnn.compress.calibrate); a layer
  whose output feeds only int8 layers writes uint8 (requantised, activation fused), any other
  writes float32, and a layer reading float32 quantises it on the way in.

These are the grids onnxruntime's QDQ/QOperator quantizer and TFLite write (u8 activations, s8
weights), so the layers take the u8 x s8 dot-product kernels.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from edgecnn.compress.calibrate import Range, observe
from edgecnn.ir.graph import Graph, Node
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.dense import GemmAttrs
from edgecnn.ops.fused import FusedActivation
from edgecnn.ops.quant import Int8ConvAttrs, Int8GemmAttrs
from edgecnn.ops.registry import op_family

LAYER_FAMILIES = ("Conv", "Gemm")
"""The op families the rewrite takes: Conv and Gemm and their fused-activation forms."""
INT32_LIMIT = 2**31 - 1


@dataclass(frozen=True)
class QuantParams:
    """An activation's uint8 grid: real = (q - zero_point) * scale."""

    scale: np.float32
    zero_point: np.uint8


def activation_params(r: Range) -> QuantParams:
    """Asymmetric uint8 over ``r`` widened to contain 0 (so 0.0 and zero padding are exact)."""
    low, high = min(r.low, 0.0), max(r.high, 0.0)
    scale = np.float32((high - low) / 255.0)
    if not scale > 0:
        scale = np.float32(1.0)
    zero_point = int(np.clip(np.rint(-low / float(scale)), 0, 255))
    return QuantParams(scale, np.uint8(zero_point))


def quantize_weights(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric per-output-channel (axis 0) int8 weights in -127..127 and their float32 scales."""
    rows = w.reshape(w.shape[0], -1).astype(np.float32)
    scales = (np.abs(rows).max(axis=1) / np.float32(127.0)).astype(np.float32)
    scales[scales == 0] = 1.0
    q = np.clip(np.rint(rows / scales[:, None]), -127, 127).astype(np.int8)
    return q.reshape(w.shape), scales


def _constant(graph: Graph, node: Node, index: int) -> np.ndarray | None:
    if index >= len(node.inputs) or not node.inputs[index]:
        return None
    value = graph.initializers.get(node.inputs[index])
    return None if value is None else np.asarray(value)


def gemm_weights(graph: Graph, node: Node) -> tuple[np.ndarray, np.ndarray | None] | None:
    """A Gemm's weights as (N, K) with alpha folded in, and its bias as [N] with beta folded in;
    None if the layer cannot be quantised (transposed A, non-constant or non-float32 operands)."""
    attrs: GemmAttrs = node.attrs
    b, c = _constant(graph, node, 1), _constant(graph, node, 2)
    if attrs.trans_a or b is None or b.ndim != 2 or b.dtype != np.float32:
        return None
    weights = (b if attrs.trans_b else b.T) * np.float32(attrs.alpha)
    if len(node.inputs) > 2 and node.inputs[2] and c is None:
        return None
    bias = None
    if c is not None:
        if c.dtype != np.float32 or c.size not in (1, weights.shape[0]) or c.ndim > 2:
            return None
        if c.ndim == 2 and c.shape[0] != 1:
            return None
        bias = np.broadcast_to(c.reshape(-1), (weights.shape[0],)) * np.float32(attrs.beta)
    return np.ascontiguousarray(weights, dtype=np.float32), bias


def quantizable(graph: Graph, node: Node) -> bool:
    """A 2-D Conv or a Gemm with constant float32 weights (and bias) that the rewrite can take."""
    if op_family(node.op) not in LAYER_FAMILIES or len(node.outputs) != 1:
        return False
    if op_family(node.op) == "Conv":
        w, b = _constant(graph, node, 1), _constant(graph, node, 2)
        has_bias = len(node.inputs) > 2 and bool(node.inputs[2])
        return w is not None and w.ndim == 4 and w.dtype == np.float32 and (not has_bias or b is not None)
    return gemm_weights(graph, node) is not None


def layers_to_quantize(graph: Graph) -> list[Node]:
    return [node for node in graph.nodes if quantizable(graph, node)]


def tensors_to_observe(graph: Graph) -> list[str]:
    """The activations whose ranges the rewrite needs: each layer's input and output."""
    names: list[str] = []
    for node in layers_to_quantize(graph):
        names += [node.inputs[0], node.outputs[0]]
    return list(dict.fromkeys(names))


def int8_attrs(node: Node) -> Int8ConvAttrs | Int8GemmAttrs:
    """The layer's attributes with its fused activation carried over."""
    act = node.attrs if isinstance(node.attrs, FusedActivation) else FusedActivation()
    activation = {f.name: getattr(act, f.name) for f in dataclasses.fields(FusedActivation)}
    if isinstance(node.attrs, ConvAttrs):
        geometry = {f.name: getattr(node.attrs, f.name) for f in dataclasses.fields(ConvAttrs)}
        return Int8ConvAttrs(**geometry, **activation)
    return Int8GemmAttrs(trans_b=True, **activation)


def to_int8(graph: Graph, ranges: Mapping[str, Range]) -> Graph:
    """The graph with every quantisable layer replaced by its int8 form (``ranges`` must cover
    ``tensors_to_observe(graph)``); float weights no longer used are dropped."""
    layers = {id(n) for n in layers_to_quantize(graph)}
    if not layers:
        return graph.copy()
    missing = [t for t in tensors_to_observe(graph) if t not in ranges]
    if missing:
        raise ValueError(f"no calibrated range for tensor(s): {', '.join(missing)}")
    consumers = graph.consumers()
    outputs = set(graph.outputs)
    result = graph.copy()
    params: dict[str, tuple[str, str]] = {}

    def grid(tensor: str) -> tuple[str, str, QuantParams]:
        q = activation_params(ranges[tensor])
        if tensor not in params:
            params[tensor] = (f"{tensor}::scale", f"{tensor}::zero_point")
            result.initializers[params[tensor][0]] = np.asarray(q.scale, dtype=np.float32)
            result.initializers[params[tensor][1]] = np.asarray(q.zero_point, dtype=np.uint8)
        return *params[tensor], q

    def int8_output(tensor: str) -> bool:
        readers = consumers.get(tensor, [])
        return (
            tensor not in outputs
            and bool(readers)
            and all(id(r) in layers and r.inputs[0] == tensor and tensor not in r.inputs[1:] for r in readers)
        )

    nodes = []
    for original, node in zip(graph.nodes, result.nodes):
        if id(original) not in layers:
            nodes.append(node)
            continue
        nodes.append(_rewrite(graph, node, grid, int8_output(node.outputs[0]), result.initializers))
    result.nodes = nodes
    used = {name for n in result.nodes for name in n.inputs} | set(result.outputs)
    result.initializers = {k: v for k, v in result.initializers.items() if k in used}
    return result


def _rewrite(
    graph: Graph,
    node: Node,
    grid: Callable[[str], tuple[str, str, QuantParams]],
    int8_out: bool,
    initializers: dict[str, np.ndarray],
) -> Node:
    """One layer -> Int8Conv/Int8Gemm reading int8 weights, int32 bias and the activation grids."""
    x_scale, x_zp, x_params = grid(node.inputs[0])
    if op_family(node.op) == "Conv":
        op, weights, bias = "Int8Conv", _constant(graph, node, 1), _constant(graph, node, 2)
    else:
        op = "Int8Gemm"
        gemm = gemm_weights(graph, node)
        assert gemm is not None  # layers_to_quantize took the layer for it
        weights, bias = gemm
    assert weights is not None
    q_weights, w_scales = quantize_weights(weights)
    base = node.name or node.outputs[0]
    names = {
        "w": f"{base}::weight_int8",
        "ws": f"{base}::weight_scale",
        "b": f"{base}::bias_int32",
    }
    initializers[names["w"]] = q_weights
    initializers[names["ws"]] = w_scales
    inputs = [node.inputs[0], x_scale, x_zp, names["w"], names["ws"], ""]  # symmetric: no weight zero point
    inputs += list(grid(node.outputs[0])[:2]) if int8_out else ["", ""]
    if bias is not None:
        bias_scale = np.float64(x_params.scale) * w_scales.astype(np.float64)
        quantized = np.clip(np.rint(bias.astype(np.float64) / bias_scale), -INT32_LIMIT, INT32_LIMIT)
        initializers[names["b"]] = quantized.astype(np.int32)
        inputs.append(names["b"])
    return Node(op, node.name, inputs, list(node.outputs), int8_attrs(node))


def quantize_int8(
    graph: Graph,
    samples: Iterable[Mapping[str, np.ndarray] | np.ndarray],
    *,
    method: str = "minmax",
    percentile: float = 99.99,
    threads: int | None = None,
) -> Graph:
    """Calibrate on ``samples`` and rewrite: the graph (passes applied first, so activations are
    fused into the layers) with int8 layers, ready to save as .ecnn."""
    from edgecnn.passes import optimize
    from edgecnn.passes.pipeline import pipeline_without

    # to_int8 rewrites Conv/FusedConv; residual sums stay Adds so every convolution is quantised
    optimized, _ = optimize(graph.topologically_sorted(), pipeline_without("fuse_residual"))
    ranges = observe(
        optimized,
        tensors_to_observe(optimized),
        samples,
        method=method,
        percentile=percentile,
        threads=threads,
    )
    return to_int8(optimized, ranges)


@dataclass(frozen=True)
class Agreement:
    """How closely the int8 graph follows the float one on the same inputs."""

    top1: float  # fraction of samples whose first output's arg-max matches
    max_abs_diff: float  # over the first output, all samples
    samples: int


def agreement(
    float_graph: Graph,
    int8_graph: Graph,
    samples: Sequence[np.ndarray],
    threads: int | None = None,
) -> Agreement:
    """Top-1 agreement and the largest output difference of ``int8_graph`` against ``float_graph``."""
    from edgecnn.compress.evaluation import EvalSet, model_runner, top1_agreement
    from edgecnn.model import Model
    from edgecnn.runtime.options import RuntimeOptions

    options = RuntimeOptions.resolve(threads)
    result = top1_agreement(
        model_runner(Model(float_graph, options)),
        model_runner(Model(int8_graph, options)),
        EvalSet("samples", samples),
    )
    return Agreement(result.agreement, result.max_abs_diff, result.samples)


def int8_layers(graph: Graph) -> Sequence[Node]:
    """The int8 layers of a rewritten graph (for reports)."""
    return [n for n in graph.nodes if n.op in ("Int8Conv", "Int8Gemm")]
