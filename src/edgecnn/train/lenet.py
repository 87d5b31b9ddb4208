"""LeNet-5 as in seed 001 Table 3.5 (Caffe's variant): conv1 20x5x5 -> pool -> conv2 50x5x5 -> pool
-> ip1 800->500 -> ReLU -> ip2 500->classes -> softmax, for 28x28 single-channel inputs."""

from __future__ import annotations

import numpy as np

from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.ops.activation import SoftmaxAttrs
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.dense import GemmAttrs
from edgecnn.ops.pool import MaxPoolAttrs
from edgecnn.ops.registry import NoAttrs
from edgecnn.ops.shape import FlattenAttrs


def xavier_uniform(rng: np.random.Generator, shape: tuple[int, ...], fan_in: int) -> np.ndarray:
    """Caffe's "xavier" filler: uniform with variance 1 / fan_in, so the convolutions (which have no
    activation in this LeNet) neither blow up nor shrink the signal."""
    bound = np.sqrt(3.0 / fan_in)
    return rng.uniform(-bound, bound, shape).astype(np.float32)


def build_lenet5(
    classes: int = 10,
    size: int = 28,
    channels: int = 1,
    seed: int = 0,
    widths: tuple[int, int, int] = (20, 50, 500),
) -> Graph:
    """A freshly initialised LeNet-5 graph (seeded); ``widths`` are conv1, conv2 and ip1's sizes."""
    rng = np.random.default_rng(seed)
    c1, c2, hidden = widths
    after_pools = ((size - 4) // 2 - 4) // 2
    flat = c2 * after_pools * after_pools
    init = {
        "conv1.w": xavier_uniform(rng, (c1, channels, 5, 5), channels * 25),
        "conv1.b": np.zeros(c1, np.float32),
        "conv2.w": xavier_uniform(rng, (c2, c1, 5, 5), c1 * 25),
        "conv2.b": np.zeros(c2, np.float32),
        "ip1.w": xavier_uniform(rng, (hidden, flat), flat),
        "ip1.b": np.zeros(hidden, np.float32),
        "ip2.w": xavier_uniform(rng, (classes, hidden), hidden),
        "ip2.b": np.zeros(classes, np.float32),
    }
    pool = MaxPoolAttrs(kernel_shape=(2, 2), strides=(2, 2))
    fc = GemmAttrs(trans_b=True)
    nodes = [
        Node("Conv", "conv1", ["data", "conv1.w", "conv1.b"], ["conv1"], ConvAttrs(kernel_shape=(5, 5))),
        Node("MaxPool", "pool1", ["conv1"], ["pool1"], pool),
        Node("Conv", "conv2", ["pool1", "conv2.w", "conv2.b"], ["conv2"], ConvAttrs(kernel_shape=(5, 5))),
        Node("MaxPool", "pool2", ["conv2"], ["pool2"], pool),
        Node("Flatten", "flatten", ["pool2"], ["flat"], FlattenAttrs(axis=1)),
        Node("Gemm", "ip1", ["flat", "ip1.w", "ip1.b"], ["ip1"], fc),
        Node("Relu", "relu1", ["ip1"], ["relu1"], NoAttrs()),
        Node("Gemm", "ip2", ["relu1", "ip2.w", "ip2.b"], ["ip2"], fc),
        Node("Softmax", "prob", ["ip2"], ["prob"], SoftmaxAttrs(axis=1)),
    ]
    return Graph(
        [TensorSpec("data", "float32", ("batch", channels, size, size))],
        ["prob"],
        nodes,
        init,
        name="lenet5",
    )
