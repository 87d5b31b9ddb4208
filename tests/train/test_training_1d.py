"""Training on 1-D signals (N, C, L): the compiled 1-D pooling of train/layers/pool1d_kernels.py
(gradients against finite differences; forward and backward equal to the numpy window path, ties
included), the compiled 1-D convolution (conv1d_kernels.py, against the im2col path) and the shift
augmentation along the signal."""

from __future__ import annotations

import numpy as np
import pytest
from train_helpers import check_op_gradients

from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.pool import (
    AveragePoolAttrs,
    MaxPoolAttrs,
    average_pool,
    max_pool,
    padded_windows,
    pool_geometry,
)
from edgecnn.train.layers.conv import conv_backward, conv_forward
from edgecnn.train.layers.pool import (
    average_pool_backward,
    average_pool_forward,
    max_pool_backward,
    max_pool_forward,
    scatter_taps,
    window_counts,
)
from edgecnn.train.registry import Context

rng = np.random.default_rng(11)

GEOMETRIES = [
    {"kernel_shape": (5,), "strides": (2,)},  # seed 003's pools
    {"kernel_shape": (3,), "strides": (2,), "pads": (1, 2)},
    {"kernel_shape": (2,), "strides": (3,), "ceil_mode": True},
    {"kernel_shape": (3,), "dilations": (2,), "pads": (2, 1)},
]


@pytest.mark.parametrize("fields", GEOMETRIES)
def test_max_pool_1d_gradient(fields: dict) -> None:
    x = rng.permutation(2 * 3 * 13).reshape(2, 3, 13) / 10.0  # distinct: no ties
    result = max_pool_forward(MaxPoolAttrs(**fields), [x], Context())
    assert result.cache[0] == "compiled_1d"
    check_op_gradients("MaxPool", MaxPoolAttrs(**fields), [x], (0,))


@pytest.mark.parametrize("include_pad", [False, True])
@pytest.mark.parametrize("fields", GEOMETRIES)
def test_average_pool_1d_gradient(fields: dict, include_pad: bool) -> None:
    attrs = AveragePoolAttrs(**fields, count_include_pad=include_pad)
    check_op_gradients("AveragePool", attrs, [rng.standard_normal((2, 3, 13))], (0,))


@pytest.mark.parametrize("fields", GEOMETRIES)
def test_compiled_1d_matches_the_window_path(fields: dict) -> None:
    x = rng.integers(0, 4, (3, 2, 14)).astype(np.float32)  # many equal maxima
    dy = rng.standard_normal((3, 2, pool_geometry(MaxPoolAttrs(**fields), x.shape).out[0])).astype(np.float32)

    attrs = MaxPoolAttrs(**fields)
    result = max_pool_forward(attrs, [x], Context())
    np.testing.assert_array_equal(result.outputs[0], max_pool(attrs, x))
    geo = pool_geometry(attrs, x.shape)
    windows = padded_windows(x, geo, -np.inf)
    winner = windows.reshape(*windows.shape[:3], -1).argmax(axis=-1)
    taps = (winner[..., None] == np.arange(geo.kernel[0])) * dy[..., None]
    expected = scatter_taps(taps.astype(np.float32), x.shape, geo)
    np.testing.assert_allclose(max_pool_backward(attrs, result.cache, dy, [True])[0], expected, rtol=1e-6)

    average = AveragePoolAttrs(**fields)
    result = average_pool_forward(average, [x], Context())
    np.testing.assert_allclose(result.outputs[0], average_pool(average, x), rtol=1e-6)
    share = dy / window_counts(average, x.shape, geo)
    spread = np.broadcast_to(share[..., None], (*dy.shape, geo.kernel[0])).astype(np.float32)
    np.testing.assert_allclose(
        average_pool_backward(average, result.cache, dy, [True])[0],
        scatter_taps(np.ascontiguousarray(spread), x.shape, geo),
        rtol=1e-5,
        atol=1e-6,
    )


def test_random_shift_moves_signals_along_their_length() -> None:
    from edgecnn.train.trainer import random_shift

    signals = np.arange(2 * 3 * 10, dtype=np.float32).reshape(2, 3, 10) + 1
    shifted = random_shift(signals, 2, np.random.default_rng(0))
    assert shifted.shape == signals.shape
    for original, moved in zip(signals, shifted):
        offsets = [
            d for d in range(-2, 3) if np.array_equal(np.roll(original, d, axis=1)[:, 2:-2], moved[:, 2:-2])
        ]
        assert len(offsets) == 1
        zeros = (moved == 0).sum(axis=1)
        assert (zeros == abs(offsets[0])).all()


@pytest.mark.parametrize(
    ("attrs", "x_shape", "w_shape"),
    [
        (ConvAttrs(), (3, 1, 150), (6, 1, 5)),  # seed 003's first layer
        (ConvAttrs(strides=(2,), pads=(1, 2), dilations=(2,)), (2, 4, 17), (5, 4, 3)),
        (ConvAttrs(group=2, strides=(3,), pads=(2, 0)), (2, 4, 13), (6, 2, 4)),
    ],
)
def test_compiled_conv_1d_matches_the_2d_im2col_path(
    attrs: ConvAttrs, x_shape: tuple, w_shape: tuple
) -> None:
    """The 1-D forward and backward equal the im2col path's on the same data seen as (N, C, 1, L)."""
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    b = rng.standard_normal(w_shape[0]).astype(np.float32)
    flat = conv_forward(attrs, [x, w, b], Context())
    lifted_attrs = ConvAttrs(
        kernel_shape=(1, w_shape[2]),
        strides=(1, *(attrs.strides or (1,))),
        pads=(0, (attrs.pads or (0, 0))[0], 0, (attrs.pads or (0, 0))[1]),
        dilations=(1, *(attrs.dilations or (1,))),
        group=attrs.group,
    )
    lifted = conv_forward(lifted_attrs, [x[:, :, None], w[:, :, None], b], Context())
    np.testing.assert_allclose(flat.outputs[0], lifted.outputs[0][:, :, 0], rtol=1e-5, atol=1e-5)
    dy = rng.standard_normal(flat.outputs[0].shape).astype(np.float32)
    got = conv_backward(attrs, flat.cache, dy, [True, True, True])
    want = conv_backward(lifted_attrs, lifted.cache, dy[:, :, None], [True, True, True])
    for a, e in zip(got, want):
        assert a is not None and e is not None
        np.testing.assert_allclose(a, e.reshape(a.shape), rtol=1e-4, atol=1e-4)
