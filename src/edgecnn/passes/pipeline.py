"""The ordered list of passes every model goes through before planning."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from edgecnn.ir.graph import Graph
from edgecnn.passes.base import PassResult
from edgecnn.passes.eliminate_dead import eliminate_dead
from edgecnn.passes.eliminate_noop import eliminate_noop
from edgecnn.passes.fold_batch_norm import fold_batch_norm
from edgecnn.passes.fold_channel_affine import fold_channel_affine
from edgecnn.passes.fold_constants import fold_constants
from edgecnn.passes.fold_layer_scale import fold_layer_scale
from edgecnn.passes.fold_qdq import fold_qdq
from edgecnn.passes.fold_qdq_ops import fold_qdq_ops
from edgecnn.passes.fuse_activation import fuse_activation
from edgecnn.passes.fuse_gelu import fuse_gelu
from edgecnn.passes.fuse_int8_residual import fuse_int8_residual
from edgecnn.passes.fuse_residual import fuse_residual

GraphPass = Callable[[Graph], PassResult]


@dataclass(frozen=True)
class PassReport:
    name: str
    changes: list[str]


PIPELINE: tuple[tuple[str, GraphPass], ...] = (
    ("fold_qdq", fold_qdq),  # before fold_constants turns the weights' DequantizeLinear into floats
    ("fold_qdq_ops", fold_qdq_ops),  # then Add, pooling, Concat between them: on 8-bit data
    ("fuse_int8_residual", fuse_int8_residual),  # QLinearConv + QLinearAdd: the Add in the epilogue
    ("fold_constants", fold_constants),
    ("eliminate_noop", eliminate_noop),
    # affine maps first (BN, then Caffe's Scale as Mul/Add), so the activation lands on the final conv
    ("fold_batch_norm", fold_batch_norm),
    ("fold_channel_affine", fold_channel_affine),
    ("fold_layer_scale", fold_layer_scale),  # ConvNeXt's per-column Mul into the MatMul before it
    ("fuse_gelu", fuse_gelu),  # the Erf form as one Gelu node
    ("fuse_activation", fuse_activation),
    ("fuse_residual", fuse_residual),  # conv + Add (+ activation): after fuse_activation took plain ones
    ("eliminate_dead", eliminate_dead),
)


def pipeline_without(*names: str) -> tuple[tuple[str, GraphPass], ...]:
    """PIPELINE minus the named passes: to measure what a pass is worth, or for a rewrite that runs
    after the passes and does not know an op they create yet."""
    unknown = set(names) - {name for name, _ in PIPELINE}
    if unknown:
        raise ValueError(f"no pass named {', '.join(sorted(unknown))} in the pipeline")
    return tuple((name, graph_pass) for name, graph_pass in PIPELINE if name not in names)


def optimize(
    graph: Graph, passes: Sequence[tuple[str, GraphPass]] = PIPELINE
) -> tuple[Graph, list[PassReport]]:
    """Run ``passes`` in order on a topologically sorted graph; report what each changed."""
    reports = []
    for name, graph_pass in passes:
        outcome = graph_pass(graph)
        graph = outcome.graph
        reports.append(PassReport(name, outcome.changes))
    return graph, reports
