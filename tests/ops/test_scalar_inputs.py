"""References of element-wise ops take 0-d (scalar) tensors as well as arrays."""

from __future__ import annotations

import math

import numpy as np

from edgecnn.ops.registry import NoAttrs, get_op


def test_erf_of_a_scalar_tensor_is_a_scalar_tensor() -> None:
    x = np.array(0.5, dtype=np.float32)
    y = get_op("Erf").reference(NoAttrs(), x)
    assert y.shape == () and y.dtype == np.float32
    assert math.isclose(float(y), math.erf(0.5), rel_tol=1e-6)


def test_erf_of_an_array_is_unchanged() -> None:
    x = np.linspace(-3, 3, 13, dtype=np.float32).reshape(1, 13)
    y = get_op("Erf").reference(NoAttrs(), x)
    assert y.shape == x.shape and y.dtype == np.float32
    assert np.allclose(y, [math.erf(v) for v in x.reshape(-1).astype(np.float64)], rtol=1e-6)
