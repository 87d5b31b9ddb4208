"""Fuse a MaxPool/AveragePool with the activation that alone reads its output, act(pool(x)), into
one FusedMaxPool/FusedAveragePool step: the pool kernel applies the activation as it writes each
pooled value, so the tensor is not read and written a second time. Exact for every activation the
fused ops know (the same ones as fuse_activation: Relu, LeakyRelu, constant-bound Clip, Sigmoid,
HardSwish, SiLU as Mul(x, Sigmoid(x))), because it is still applied after pooling.

Most CNNs apply the activation before the pool, where fuse_activation has already put it into the
convolution; this pass is for the others (e.g. Caffe's CIFAR-10 example nets: conv1, pool1, relu1).
"""

from __future__ import annotations

from dataclasses import fields

from edgecnn.ir.graph import Graph, Node
from edgecnn.ops.fused import FusedActivation
from edgecnn.ops.fused_pool import FUSED_POOL_OPS
from edgecnn.passes.base import PassResult
from edgecnn.passes.fuse_activation import activation_reading, fuse_producers


def _match(
    graph: Graph, node: Node, consumers: dict[str, list[Node]]
) -> tuple[list[Node], FusedActivation | None]:
    """The activation nodes to absorb into pool ``node`` and the activation they apply."""
    if node.op not in FUSED_POOL_OPS or len(node.outputs) != 1:
        return [], None
    return activation_reading(graph, node.outputs[0], consumers)


def _fused(node: Node, activation: FusedActivation, output: str) -> Node:
    """The pool as its fused op, writing ``output`` (the activation's)."""
    op, attrs_type = FUSED_POOL_OPS[node.op]
    settings = {f.name: getattr(node.attrs, f.name) for f in fields(node.attrs)}
    settings.update({f.name: getattr(activation, f.name) for f in fields(FusedActivation)})
    return Node(op, node.name, list(node.inputs), [output], attrs_type(**settings))


def fuse_pool_activation(graph: Graph) -> PassResult:
    return fuse_producers(graph, _match, _fused)
