"""Gemm, FusedGemm and MatMul on CUDA (cuBLAS through CuPy) against the reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cuda.support import check_node, rand
from edgecnn.kernels.cuda import get_device
from edgecnn.kernels.cuda.blas import ONE
from edgecnn.ops.dense import GemmAttrs
from edgecnn.ops.fused import ACTIVATIONS, FusedGemmAttrs

SIZES = st.integers(1, 37)


@settings(max_examples=30, deadline=None)
@given(
    m=SIZES, n=SIZES, k=SIZES, trans_a=st.booleans(), trans_b=st.booleans(),
    c_shape=st.sampled_from(["none", "scalar", "row", "column", "full"]),
    alpha=st.sampled_from([1.0, 0.5]), beta=st.sampled_from([1.0, -2.0, 0.0]),
    constants=st.sampled_from([(), (1,), (1, 2), (0, 2)]), seed=st.integers(0, 99),
)  # fmt: skip
def test_gemm_matches_reference(
    m: int, n: int, k: int, trans_a: bool, trans_b: bool, c_shape: str, alpha: float, beta: float,
    constants: tuple[int, ...], seed: int,
) -> None:  # fmt: skip
    rng = np.random.default_rng(seed)
    a = rand(rng, k, m) if trans_a else rand(rng, m, k)
    b = rand(rng, n, k) if trans_b else rand(rng, k, n)
    shapes = {"scalar": (), "row": (n,), "column": (m, 1), "full": (m, n)}
    c = None if c_shape == "none" else rand(rng, *shapes[c_shape])
    attrs = GemmAttrs(alpha=alpha, beta=beta, trans_a=trans_a, trans_b=trans_b)
    check_node("Gemm", attrs, [a, b, c], [i for i in constants if i < 2 or c is not None], "cuda_gemm", k)


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_fused_gemm_applies_every_activation(activation: str) -> None:
    rng = np.random.default_rng(1)
    a, b, c = rand(rng, 3, 40), rand(rng, 17, 40), rand(rng, 17)
    attrs = FusedGemmAttrs(trans_b=True, activation=activation, low=-0.5, high=0.75)
    check_node("FusedGemm", attrs, [4 * a, b, c], (1, 2), "cuda_fused_gemm", 40)


def test_leaky_slope_is_not_gemm_alpha() -> None:
    rng = np.random.default_rng(1)
    a, b = rand(rng, 6, 9), rand(rng, 9, 5)
    attrs = FusedGemmAttrs(alpha=2.0, activation="leaky_relu", negative_slope=0.3)
    check_node("FusedGemm", attrs, [a, b], (1,), "cuda_fused_gemm", 9)


def test_seed_sized_gemm() -> None:
    """Seed 001's 512 x 1024 by 1024 x 512 product (no TF32: float32 accuracy is kept)."""
    rng = np.random.default_rng(2)
    check_node("Gemm", GemmAttrs(), [rand(rng, 512, 1024), rand(rng, 1024, 512)], (1,), "cuda_gemm", 1024)


@pytest.mark.parametrize(
    ("a_shape", "b_shape"),
    [
        ((5, 7), (7, 3)),
        ((7,), (7, 3)),
        ((5, 7), (7,)),
        ((7,), (7,)),
        ((2, 3, 5, 7), (7, 4)),
        ((5, 7), (2, 7, 4)),
        ((2, 3, 5, 7), (2, 3, 7, 4)),
        ((2, 1, 3, 4), (1, 3, 4, 5)),  # mixed batch broadcasting
    ],
)
@pytest.mark.parametrize("constant_b", [False, True])
def test_matmul_matches_reference(
    a_shape: tuple[int, ...], b_shape: tuple[int, ...], constant_b: bool
) -> None:
    rng = np.random.default_rng(2)
    a, b = rand(rng, *a_shape), rand(rng, *b_shape)
    check_node("MatMul", None, [a, b], (1,) if constant_b else (), "cuda_matmul", a_shape[-1])


@pytest.mark.parametrize(("batches", "shared"), [(1, ""), (3, "a"), (3, "b"), (2, "")])
def test_direct_cublas_gemm_batched_and_shared_operands(batches: int, shared: str) -> None:
    """Row-major products through the column-major library, one operand optionally shared."""
    device = get_device(0)
    rng = np.random.default_rng(batches)
    m, n, k = 5, 7, 3
    a = rand(rng, 1 if shared == "a" else batches, m, k)
    b = rand(rng, 1 if shared == "b" else batches, k, n)
    da, db, y = device.upload(a), device.upload(b), device.empty((batches, m, n))
    alpha = np.array([0.5], np.float32)
    a_stride, b_stride = (0 if shared == "a" else m * k), (0 if shared == "b" else k * n)
    device.blas.gemm(m, n, k, da.data.ptr, db.data.ptr, y.data.ptr, alpha, batches, a_stride, b_stride)
    np.testing.assert_allclose(y.get(), 0.5 * (a @ b), rtol=1e-5, atol=1e-6)
    device.blas.gemm(m, n, k, da.data.ptr, db.data.ptr, y.data.ptr, ONE)
    np.testing.assert_allclose(y.get()[0], a[0] @ b[0], rtol=1e-5, atol=1e-6)
