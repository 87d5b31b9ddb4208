"""The training view of a graph: whole-network gradients, the softmax head, BatchNorm's running
statistics, dropout, refusals; the optimiser and schedules."""

from __future__ import annotations

import numpy as np
import pytest
from train_helpers import numeric_grad, small_lenet

from edgecnn.errors import GraphError, InputError, UnsupportedOperatorError
from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.ops.activation import AlphaAttrs, LeakyReluAttrs
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.dense import GemmAttrs
from edgecnn.ops.norm import BatchNormalizationAttrs
from edgecnn.ops.pool import AveragePoolAttrs
from edgecnn.ops.registry import NoAttrs
from edgecnn.ops.shape import FlattenAttrs
from edgecnn.train.loss import softmax_cross_entropy
from edgecnn.train.network import Network
from edgecnn.train.optim import SGD, Schedule
from edgecnn.train.registry import Context


def bn_net(dtype: type = np.float64) -> Graph:
    """Conv -> BatchNorm -> LeakyRelu -> AveragePool -> Flatten -> Dropout -> Gemm -> Sigmoid -> Gemm."""
    rng = np.random.default_rng(2)
    init = {
        "c.w": rng.standard_normal((3, 2, 3, 3)) * 0.5,
        "c.b": rng.standard_normal(3) * 0.1,
        "bn.s": 1 + rng.standard_normal(3) * 0.1,
        "bn.b": rng.standard_normal(3) * 0.1,
        "bn.m": np.zeros(3),
        "bn.v": np.ones(3),
        "f.w": rng.standard_normal((5, 12)) * 0.3,
        "f.b": np.zeros(5),
        "g.w": rng.standard_normal((5, 4)) * 0.3,
        "ratio": np.array(0.25),
    }
    nodes = [
        Node("Conv", "conv", ["x", "c.w", "c.b"], ["c"], ConvAttrs(pads=(1, 1, 1, 1))),
        Node(
            "BatchNormalization",
            "bn",
            ["c", "bn.s", "bn.b", "bn.m", "bn.v"],
            ["n"],
            BatchNormalizationAttrs(),
        ),
        Node("LeakyRelu", "act", ["n"], ["a"], LeakyReluAttrs(0.2)),
        Node("AveragePool", "pool", ["a"], ["p"], AveragePoolAttrs(kernel_shape=(2, 2), strides=(2, 2))),
        Node("Flatten", "flat", ["p"], ["fl"], FlattenAttrs()),
        Node("Dropout", "drop", ["fl", "ratio"], ["d"], NoAttrs()),
        Node("Gemm", "fc", ["d", "f.w", "f.b"], ["h"], GemmAttrs(trans_b=True)),
        Node("Sigmoid", "sig", ["h"], ["s"], NoAttrs()),
        Node("MatMul", "out", ["s", "g.w"], ["logits"], NoAttrs()),
    ]
    init = {k: np.asarray(v, dtype) for k, v in init.items()}
    return Graph([TensorSpec("x", "float64", ("batch", 2, 4, 4))], ["logits"], nodes, init, name="bn_net")


def test_whole_network_gradient_matches_finite_differences() -> None:
    network = Network(bn_net())
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 2, 4, 4))
    labels = rng.integers(0, 4, 6)

    def loss() -> float:
        saved = {k: network.values[k].copy() for k in ("bn.m", "bn.v")}
        logits, _ = network.forward(x, Context(True, np.random.default_rng(9)))
        network.values.update(saved)  # keep the running statistics fixed between probes
        return softmax_cross_entropy(logits, labels)[0]

    saved = {k: network.values[k].copy() for k in ("bn.m", "bn.v")}
    logits, tape = network.forward(x, Context(True, np.random.default_rng(9)))
    network.values.update(saved)
    grads = network.backward(tape, softmax_cross_entropy(logits, labels)[1])
    assert set(grads) == {"c.w", "c.b", "bn.s", "bn.b", "f.w", "f.b", "g.w"}
    for name, grad in grads.items():
        expected = numeric_grad(loss, network.values[name])
        np.testing.assert_allclose(grad, expected, rtol=1e-5, atol=1e-8, err_msg=name)


def test_batch_norm_running_statistics_and_dropout_modes() -> None:
    network = Network(bn_net())
    x = np.random.default_rng(1).standard_normal((8, 2, 4, 4)) * 3 + 2
    network.forward(x, Context(True, np.random.default_rng(0), bn_momentum=0.5))
    assert not np.allclose(network.values["bn.m"], 0) and not np.allclose(network.values["bn.v"], 1)
    mean_after_one = network.values["bn.m"].copy()
    a, _ = network.forward(x, Context(training=False))
    b, _ = network.forward(x, Context(training=False))
    assert np.array_equal(a, b)  # evaluation: no dropout, statistics left alone
    assert np.array_equal(network.values["bn.m"], mean_after_one)
    c, _ = network.forward(x, Context(True, np.random.default_rng(3)))
    d, _ = network.forward(x, Context(True, np.random.default_rng(3)))
    network.values["bn.m"] = mean_after_one
    assert not np.array_equal(a, c)
    np.testing.assert_allclose(c, d, rtol=1e-12)  # same seed, same dropout mask (stats moved a little)


def test_softmax_head_is_left_out_and_weights_flow_back() -> None:
    graph = small_lenet()
    network = Network(graph)
    assert network.logits_name == "ip2" and network.head is not None and network.head.name == "prob"
    assert [n.name for n in network.nodes][-1] == "ip2"
    assert network.parameters == [
        "conv1.w",
        "conv1.b",
        "conv2.w",
        "conv2.b",
        "ip1.w",
        "ip1.b",
        "ip2.w",
        "ip2.b",
    ]
    network.values["ip2.b"][:] = 7
    assert np.all(network.graph().initializers["ip2.b"] == 7) and not np.all(graph.initializers["ip2.b"] == 7)
    with pytest.raises(InputError, match="expects shape"):
        network.check_input(np.zeros((1, 1, 28, 28), np.float32))


def test_refusals_name_the_problem() -> None:
    graph = small_lenet()
    graph.nodes[6] = Node("Elu", "relu1", ["ip1"], ["relu1"], AlphaAttrs())
    with pytest.raises(UnsupportedOperatorError, match=r"Elu at node\(s\): relu1"):
        Network(graph)
    two = small_lenet()
    two.outputs = ["prob", "ip1"]
    with pytest.raises(GraphError, match="one input and one output"):
        Network(two)


def test_sgd_momentum_weight_decay_and_masks() -> None:
    params = {"w": np.array([1.0, 2.0, 3.0]), "b": np.array([1.0])}
    sgd = SGD(momentum=0.5, weight_decay=0.1, decayed=["w"])
    grads = {"w": np.array([1.0, 1.0, 1.0]), "b": np.array([1.0])}
    mask = {"w": np.array([True, True, False])}
    sgd.step(params, grads, lr=0.1, masks=mask)
    np.testing.assert_allclose(params["w"], [1 - 0.1 * 1.1, 2 - 0.1 * 1.2, 0.0])
    np.testing.assert_allclose(params["b"], [0.9])  # no decay on biases
    sgd.step(params, grads, lr=0.1, masks=mask)
    v = 0.5 * 1.1 + (1 + 0.1 * (1 - 0.11))
    np.testing.assert_allclose(params["w"][0], 1 - 0.11 - 0.1 * v)
    assert params["w"][2] == 0 and sgd.velocity["w"][2] == 0
    with pytest.raises(InputError):
        SGD(momentum=1.0)


def test_schedules() -> None:
    step = Schedule("step", lr=0.1, step_size=2, gamma=0.5, epochs=6)
    assert [step.at(e) for e in (0, 1.9, 2, 4.5)] == pytest.approx([0.1, 0.1, 0.05, 0.025])
    cosine = Schedule("cosine", lr=0.1, epochs=4, min_lr=0.01)
    assert (
        cosine.at(0) == pytest.approx(0.1)
        and cosine.at(2) == pytest.approx(0.055)
        and cosine.at(4) == pytest.approx(0.01)
    )
    assert Schedule("constant", lr=0.3).at(100) == 0.3
    with pytest.raises(InputError, match="unknown learning-rate schedule"):
        Schedule("linear")
