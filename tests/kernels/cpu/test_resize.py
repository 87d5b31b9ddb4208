"""Nearest Resize (kernel "resize_nearest") against the numpy reference: scales and sizes, up and
down, every coordinate and nearest mode but tf_crop_and_resize, odd sizes, one and two threads;
linear resizes and resizes of the channel axis stay on the reference."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgecnn.ops.resize import COORDINATE_MODES, NEAREST_MODES, ResizeAttrs
from edgecnn.testing import reference_run
from kernels.support import fast_run, tuned

MODES = [m for m in COORDINATE_MODES if m != "tf_crop_and_resize"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shape=st.tuples(st.integers(1, 3), st.integers(1, 5), st.integers(1, 11), st.integers(1, 11)),
    factors=st.tuples(st.sampled_from([0.5, 1.0, 1.5, 2.0, 3.0]), st.sampled_from([0.5, 1.0, 2.0, 2.5])),
    by_sizes=st.booleans(),
    mode=st.sampled_from(MODES),
    nearest=st.sampled_from(NEAREST_MODES),
    threads=st.sampled_from([1, 2]),
    seed=st.integers(0, 2**16),
)
def test_nearest_resize_matches_reference(
    shape: tuple[int, int, int, int],
    factors: tuple[float, float],
    by_sizes: bool,
    mode: str,
    nearest: str,
    threads: int,
    seed: int,
) -> None:
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    attrs = ResizeAttrs(coordinate_transformation_mode=mode, nearest_mode=nearest)
    if by_sizes:
        sizes = np.array([*shape[:2], *(max(1, int(d * f)) for d, f in zip(shape[2:], factors))], np.int64)
        inputs: list[np.ndarray | None] = [x, None, None, sizes]
        constants: tuple[int, ...] = (3,)
    else:
        inputs = [x, None, np.array([1.0, 1.0, *factors], np.float32)]
        constants = (2,)
    with tuned(grain=0 if threads == 2 else 1 << 30):
        actual, kernel = fast_run("Resize", attrs, inputs, constants, threads)
    expected = reference_run("Resize", attrs, inputs, constants)
    assert kernel == ("resize_nearest" if expected.size else "reference")  # nothing to gather
    assert np.array_equal(actual, expected)


def test_linear_and_channel_resizes_stay_on_the_reference() -> None:
    x = np.random.default_rng(0).standard_normal((1, 2, 4, 4)).astype(np.float32)
    linear = ResizeAttrs(mode="linear")
    scales = np.array([1.0, 1.0, 2.0, 2.0], np.float32)
    assert fast_run("Resize", linear, [x, None, scales], (2,), 1)[1] == "reference"
    channels = np.array([1.0, 2.0, 1.0, 1.0], np.float32)
    actual, kernel = fast_run("Resize", ResizeAttrs(), [x, None, channels], (2,), 1)
    assert kernel == "reference" and actual.shape == (1, 4, 4, 4)
