"""MaxPool, AveragePool and the global pools on every GPU-ish backend against the reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from edgecnn.ops.common import AutoPad
from edgecnn.ops.pool import AveragePoolAttrs, MaxPoolAttrs
from kernels.gpu.backends.support import Backend, rand


def test_pool2d_matches_reference(device: Backend) -> None:
    @settings(max_examples=device.pick(opencl=30, cuda=40), deadline=None)
    @given(
        kind=st.sampled_from(["max", "avg"]), n=st.integers(1, 2), c=st.integers(1, 3), h=st.integers(1, 12),
        w=st.integers(1, 12), kh=st.integers(1, 4), kw=st.integers(1, 4), sh=st.integers(1, 3),
        sw=st.integers(1, 3), dh=st.integers(1, 2), dw=st.integers(1, 2),
        pads=st.tuples(*[st.integers(0, 2)] * 4), ceil_mode=st.booleans(), count_include_pad=st.booleans(),
        seed=st.integers(0, 99),
    )  # fmt: skip
    def check(
        kind: str, n: int, c: int, h: int, w: int, kh: int, kw: int, sh: int, sw: int, dh: int, dw: int,
        pads: tuple[int, int, int, int], ceil_mode: bool, count_include_pad: bool, seed: int,
    ) -> None:  # fmt: skip
        span_h, span_w = (kh - 1) * dh + 1, (kw - 1) * dw + 1
        assume(max(pads[0], pads[2]) < span_h and max(pads[1], pads[3]) < span_w)
        assume(h + pads[0] + pads[2] >= span_h and w + pads[1] + pads[3] >= span_w)
        x = rand(np.random.default_rng(seed), n, c, h, w)
        geometry = dict(
            kernel_shape=(kh, kw), strides=(sh, sw), dilations=(dh, dw), pads=pads, ceil_mode=ceil_mode
        )
        for forms in device.kernel_forms():
            with forms():
                if kind == "max":
                    device.check_node("MaxPool", MaxPoolAttrs(**geometry), [x], kernel="max_pool")  # type: ignore[arg-type]
                else:
                    attrs = AveragePoolAttrs(**geometry, count_include_pad=count_include_pad)  # type: ignore[arg-type]
                    device.check_node("AveragePool", attrs, [x], kernel="average_pool")

    check()


@pytest.mark.parametrize(
    ("op", "attrs"),
    [
        ("MaxPool", MaxPoolAttrs(kernel_shape=(3, 3), strides=(2, 2), ceil_mode=True)),  # Caffe/AlexNet
        ("MaxPool", MaxPoolAttrs(kernel_shape=(2, 2), auto_pad=AutoPad.SAME_UPPER)),
        ("MaxPool", MaxPoolAttrs(kernel_shape=(3,), strides=(2,), pads=(1, 1))),
        ("AveragePool", AveragePoolAttrs(kernel_shape=(3,), pads=(1, 0), count_include_pad=True)),
        (
            "AveragePool",
            AveragePoolAttrs(kernel_shape=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1), ceil_mode=True),
        ),
    ],
)
def test_pool_special_geometries(device: Backend, op: str, attrs: object) -> None:
    rank = len(attrs.kernel_shape)  # type: ignore[attr-defined]
    x = rand(np.random.default_rng(1), 2, 3, *([13] * rank))
    for forms in device.kernel_forms():
        with forms():
            device.check_node(op, attrs, [x], kernel=f"{'max' if op == 'MaxPool' else 'average'}_pool")


def test_max_pool_propagates_nan(device: Backend) -> None:
    x = rand(np.random.default_rng(2), 1, 1, 4, 4)
    x[0, 0, 1, 1] = np.nan
    device.check_node("MaxPool", MaxPoolAttrs(kernel_shape=(2, 2), strides=(2, 2)), [x], kernel="max_pool")


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("shape", [(1, 5, 7, 7), (2, 3, 13), (2, 3, 2, 3, 4), (3, 2, 1, 1), (1, 2, 70, 70)])
def test_global_pools(device: Backend, op: str, shape: tuple[int, ...]) -> None:
    x = rand(np.random.default_rng(3), *shape)
    device.check_node(op, None, [x], kernel="global_average_pool" if "Average" in op else "global_max_pool")
