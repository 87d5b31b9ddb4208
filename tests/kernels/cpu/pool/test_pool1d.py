"""The 1-D pooling kernel (``pool_1d``) against the numpy reference: max and average, random odd
lengths, windows, strides, dilations, padding, ceil_mode, count_include_pad, the fused activations,
on one and two threads; NaN propagation."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgecnn.ops.fused import ACTIVATIONS
from edgecnn.ops.fused_pool import FusedAveragePoolAttrs, FusedMaxPoolAttrs
from edgecnn.ops.pool import AveragePoolAttrs, MaxPoolAttrs
from edgecnn.testing import assert_matches, reference_run
from kernels.support import fast_run, tuned


@st.composite
def pool_1d_cases(draw: st.DrawFn) -> dict:
    taps, dilation, stride = draw(st.integers(1, 7)), draw(st.integers(1, 3)), draw(st.integers(1, 4))
    span = (taps - 1) * dilation + 1
    pads = (draw(st.integers(0, span - 1)), draw(st.integers(0, span - 1)))
    length = draw(st.integers(max(1, span - sum(pads)), 67))
    fields = {
        "kernel_shape": (taps,),
        "strides": (stride,),
        "dilations": (dilation,),
        "pads": pads,
        "ceil_mode": draw(st.booleans()),
    }
    if draw(st.booleans()):
        attrs: MaxPoolAttrs | AveragePoolAttrs = MaxPoolAttrs(**fields)
    else:
        attrs = AveragePoolAttrs(**fields, count_include_pad=draw(st.booleans()))
    return {
        "x_shape": (draw(st.integers(1, 4)), draw(st.integers(1, 7)), length),
        "attrs": attrs,
        "activation": draw(st.sampled_from(["none", *ACTIVATIONS])),
        "threads": draw(st.sampled_from([1, 2])),
        "seed": draw(st.integers(0, 2**16)),
    }


def check(attrs: MaxPoolAttrs | AveragePoolAttrs, activation: str, x: np.ndarray, threads: int) -> None:
    op = "MaxPool" if isinstance(attrs, MaxPoolAttrs) else "AveragePool"
    if activation != "none":
        fused = FusedMaxPoolAttrs if op == "MaxPool" else FusedAveragePoolAttrs
        parameters = {"negative_slope": 0.2, "low": -0.5, "high": 1.5}
        op, attrs = f"Fused{op}", fused(**vars(attrs), activation=activation, **parameters)
    with tuned(grain=0 if threads == 2 else 1 << 30):
        actual, kernel = fast_run(op, attrs, [x], (), threads)
    assert kernel == "pool_1d"
    assert_matches(actual, reference_run(op, attrs, [x], ()), np.nanmax(np.abs(x)))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=pool_1d_cases())
def test_pool_1d_matches_reference(case: dict) -> None:
    x = np.random.default_rng(case["seed"]).standard_normal(case["x_shape"]).astype(np.float32)
    check(case["attrs"], case["activation"], x, case["threads"])


def test_nan_and_seed_003_pools() -> None:
    """The radar network's pools (window 5, stride 2) at batch 256; a NaN reaches exactly the
    outputs whose windows hold it, in max and average alike."""
    rng = np.random.default_rng(5)
    for shape in ((256, 6, 146), (256, 12, 67)):
        x = rng.standard_normal(shape).astype(np.float32)
        x[3, 1, 20] = np.nan
        for attrs in (AveragePoolAttrs((5,), (2,)), MaxPoolAttrs((5,), (2,))):
            check(attrs, "relu", x, 2)


def test_non_contiguous_input() -> None:
    from edgecnn.ir.graph import Node, TensorType
    from edgecnn.kernels.cpu.pool.pool1d import Pool1d

    wide = np.random.default_rng(7).standard_normal((2, 3, 40)).astype(np.float32)
    x = wide[:, :, ::2]
    node = Node("AveragePool", "p", ["x"], ["y"], AveragePoolAttrs((3,), (2,)))
    step = Pool1d(node, [TensorType("float32", x.shape)], [None])
    np.testing.assert_array_equal(step(x), step(np.ascontiguousarray(x)))
