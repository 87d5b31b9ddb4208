"""Every trainable layer's backward against finite differences (float64)."""

from __future__ import annotations

import numpy as np
import pytest
from train_helpers import check_op_gradients

from edgecnn.ops.activation import LeakyReluAttrs, SoftmaxAttrs
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.dense import GemmAttrs
from edgecnn.ops.norm import BatchNormalizationAttrs
from edgecnn.ops.pool import AveragePoolAttrs, MaxPoolAttrs
from edgecnn.ops.registry import NoAttrs
from edgecnn.ops.shape import FlattenAttrs, ReshapeAttrs

rng = np.random.default_rng(7)


def normal(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape)


@pytest.mark.parametrize(
    ("attrs", "x_shape", "w_shape"),
    [
        (ConvAttrs(), (2, 3, 5, 6), (4, 3, 3, 3)),
        (ConvAttrs(strides=(2, 1), pads=(1, 0, 2, 1)), (1, 2, 7, 5), (3, 2, 3, 2)),
        (ConvAttrs(dilations=(2, 2), pads=(2, 2, 2, 2)), (2, 2, 5, 5), (2, 2, 3, 3)),
        (ConvAttrs(group=2, strides=(2, 2), pads=(1, 1, 1, 1)), (2, 4, 5, 5), (6, 2, 3, 3)),
        (ConvAttrs(group=3), (1, 3, 4, 4), (3, 1, 2, 2)),  # depthwise
        (ConvAttrs(strides=(2,), pads=(1, 1)), (2, 2, 9), (3, 2, 3)),  # 1-D
    ],
)
def test_conv(attrs: ConvAttrs, x_shape: tuple, w_shape: tuple) -> None:
    check_op_gradients("Conv", attrs, [normal(*x_shape), normal(*w_shape), normal(w_shape[0])], (0, 1, 2))


def test_conv_without_bias() -> None:
    check_op_gradients("Conv", ConvAttrs(), [normal(1, 2, 4, 4), normal(3, 2, 2, 2)], (0, 1))


@pytest.mark.parametrize(
    ("attrs", "a", "b", "c"),
    [
        (GemmAttrs(trans_b=True), (3, 5), (4, 5), (4,)),
        (GemmAttrs(alpha=0.5, beta=2.0), (3, 5), (5, 4), (3, 4)),
        (GemmAttrs(trans_a=True, beta=0.3), (5, 3), (5, 4), (1, 4)),
    ],
)
def test_gemm(attrs: GemmAttrs, a: tuple, b: tuple, c: tuple) -> None:
    check_op_gradients("Gemm", attrs, [normal(*a), normal(*b), normal(*c)], (0, 1, 2))


def test_matmul_and_add_with_broadcast() -> None:
    check_op_gradients("MatMul", NoAttrs(), [normal(2, 3, 4), normal(4, 5)], (0, 1))
    check_op_gradients("Add", NoAttrs(), [normal(2, 3, 4), normal(3, 1)], (0, 1))


@pytest.mark.parametrize(
    "attrs",
    [
        MaxPoolAttrs(kernel_shape=(2, 2), strides=(2, 2)),
        MaxPoolAttrs(kernel_shape=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1)),
        MaxPoolAttrs(kernel_shape=(3, 2), strides=(2, 2), ceil_mode=True),
        MaxPoolAttrs(kernel_shape=(2, 2), dilations=(2, 2)),
    ],
)
def test_max_pool(attrs: MaxPoolAttrs) -> None:
    # distinct values keep the arg-max away from ties, where the function has no derivative
    x = rng.permutation(2 * 3 * 7 * 7).reshape(2, 3, 7, 7) / 10.0
    check_op_gradients("MaxPool", attrs, [x], (0,))


@pytest.mark.parametrize(
    "attrs",
    [
        AveragePoolAttrs(kernel_shape=(2, 2), strides=(2, 2)),
        AveragePoolAttrs(kernel_shape=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1)),
        AveragePoolAttrs(kernel_shape=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1), count_include_pad=True),
        AveragePoolAttrs(kernel_shape=(3, 2), strides=(2, 2), ceil_mode=True),
    ],
)
def test_average_pool(attrs: AveragePoolAttrs) -> None:
    check_op_gradients("AveragePool", attrs, [normal(2, 2, 7, 6)], (0,))


def test_global_average_pool() -> None:
    check_op_gradients("GlobalAveragePool", NoAttrs(), [normal(2, 3, 4, 5)], (0,))


@pytest.mark.parametrize(
    ("op", "attrs"),
    [
        ("Relu", NoAttrs()),
        ("LeakyRelu", LeakyReluAttrs(alpha=0.1)),
        ("Sigmoid", NoAttrs()),
        ("Tanh", NoAttrs()),
        ("Softmax", SoftmaxAttrs(axis=1)),
    ],
)
def test_activations(op: str, attrs: object) -> None:
    x = normal(3, 4, 5)
    x[np.abs(x) < 1e-3] = 0.5  # away from the kink of Relu/LeakyRelu
    check_op_gradients(op, attrs, [x], (0,))


def test_batch_norm_training_mode() -> None:
    x = normal(4, 3, 2, 3) * 2 + 1
    check_op_gradients(
        "BatchNormalization",
        BatchNormalizationAttrs(epsilon=1e-3),
        [x, normal(3), normal(3), np.zeros(3), np.ones(3)],
        (0, 1, 2),
    )
    check_op_gradients(  # 2-D input: the statistics run over the batch only
        "BatchNormalization",
        BatchNormalizationAttrs(),
        [normal(5, 4), normal(4), normal(4), np.zeros(4), np.ones(4)],
        (0, 1, 2),
    )


def test_dropout_flatten_reshape() -> None:
    check_op_gradients("Dropout", NoAttrs(), [normal(4, 6), np.array(0.3)], (0,), seed=3)
    check_op_gradients("Flatten", FlattenAttrs(axis=1), [normal(2, 3, 4)], (0,))
    check_op_gradients("Reshape", ReshapeAttrs(), [normal(2, 3, 4), np.array([0, -1], np.int64)], (0,))


def test_max_pool_1d_uses_the_window_path() -> None:
    x = rng.permutation(2 * 3 * 9).reshape(2, 3, 9) / 10.0
    check_op_gradients("MaxPool", MaxPoolAttrs(kernel_shape=(3,), strides=(2,), pads=(1, 1)), [x], (0,))


@pytest.mark.parametrize(
    "attrs",
    [
        MaxPoolAttrs(kernel_shape=(2, 2), strides=(2, 2)),
        MaxPoolAttrs(kernel_shape=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1)),
        MaxPoolAttrs(kernel_shape=(3, 2), strides=(2, 2), ceil_mode=True),
    ],
)
def test_compiled_max_pool_matches_the_window_path_even_on_ties(attrs: MaxPoolAttrs) -> None:
    from edgecnn.ops.pool import max_pool, padded_windows, pool_geometry
    from edgecnn.train.layers.pool import max_pool_backward, max_pool_forward
    from edgecnn.train.registry import Context

    x = rng.integers(0, 4, (2, 3, 7, 7)).astype(np.float32)  # many equal maxima
    result = max_pool_forward(attrs, [x], Context())
    assert result.cache[0] == "compiled"
    np.testing.assert_array_equal(result.outputs[0], max_pool(attrs, x))
    geo = pool_geometry(attrs, x.shape)
    windows = padded_windows(x, geo, -np.inf)
    winner = windows.reshape(*windows.shape[:4], -1).argmax(axis=-1)
    dy = rng.standard_normal(result.outputs[0].shape).astype(np.float32)
    compiled = max_pool_backward(attrs, result.cache, dy, [True])[0]
    reference = max_pool_backward(attrs, ("windows", winner, geo, x.shape), dy, [True])[0]
    np.testing.assert_allclose(compiled, reference, rtol=1e-6)
