"""The small graph the compression tests prune and quantise (importable: conftest.py puts this folder on sys.path)."""

from __future__ import annotations

import numpy as np

from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.dense import GemmAttrs
from edgecnn.ops.registry import NoAttrs
from edgecnn.ops.shape import FlattenAttrs


def net(seed: int = 0) -> Graph:
    """Conv -> Flatten -> Gemm(trans_b) -> MatMul(x @ W) -> Gemm(B as [K, N]); plus an int "weight"."""
    rng = np.random.default_rng(seed)
    inits = {
        "conv.w": rng.standard_normal((6, 2, 3, 3)).astype(np.float32),
        "conv.b": rng.standard_normal(6).astype(np.float32),
        "fc1.w": rng.standard_normal((10, 24)).astype(np.float32),
        "mm.w": rng.standard_normal((10, 7)).astype(np.float32),
        "fc2.w": rng.standard_normal((7, 3)).astype(np.float32),
    }
    nodes = [
        Node(
            "Conv",
            "conv",
            ["x", "conv.w", "conv.b"],
            ["c"],
            ConvAttrs((3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1),
        ),
        Node("Flatten", "flat", ["c"], ["f"], FlattenAttrs(1)),
        Node("Gemm", "fc1", ["f", "fc1.w"], ["g"], GemmAttrs(trans_b=True)),
        Node("MatMul", "mm", ["g", "mm.w"], ["m"], NoAttrs()),
        Node("Gemm", "fc2", ["m", "fc2.w"], ["y"], GemmAttrs()),
    ]
    return Graph([TensorSpec("x", "float32", (1, 2, 4, 4))], ["y"], nodes, inits, name="net")


def wide_net(seed: int = 0) -> Graph:
    """Gemm(trans_b) [200, 300] -> MatMul [300, 100]: big enough that 64-byte padding does not decide storages."""
    rng = np.random.default_rng(seed)
    inits = {
        "fc.w": rng.standard_normal((200, 300)).astype(np.float32),
        "mm.w": rng.standard_normal((200, 100)).astype(np.float32),
    }
    nodes = [
        Node("Gemm", "fc", ["x", "fc.w"], ["h"], GemmAttrs(trans_b=True)),
        Node("MatMul", "mm", ["h", "mm.w"], ["y"], NoAttrs()),
    ]
    return Graph([TensorSpec("x", "float32", (1, 300))], ["y"], nodes, inits, name="wide")
