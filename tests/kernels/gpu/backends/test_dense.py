"""Gemm, FusedGemm and MatMul on every GPU-ish backend against the reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgecnn.ops.dense import GemmAttrs
from edgecnn.ops.fused import ACTIVATIONS, FusedGemmAttrs
from kernels.gpu.backends.support import Backend, rand

SIZES = st.integers(1, 37)


def test_gemm_matches_reference(device: Backend) -> None:
    @settings(max_examples=device.pick(opencl=20, cuda=30), deadline=None)
    @given(
        m=SIZES, n=SIZES, k=SIZES, trans_a=st.booleans(), trans_b=st.booleans(),
        c_shape=st.sampled_from(["none", "scalar", "row", "column", "full"]),
        alpha=st.sampled_from([1.0, 0.5]), beta=st.sampled_from([1.0, -2.0, 0.0]),
        constants=st.sampled_from([(), (1,), (1, 2), (0, 2)]), seed=st.integers(0, 99),
    )  # fmt: skip
    def check(
        m: int, n: int, k: int, trans_a: bool, trans_b: bool, c_shape: str, alpha: float, beta: float,
        constants: tuple[int, ...], seed: int,
    ) -> None:  # fmt: skip
        rng = np.random.default_rng(seed)
        a = rand(rng, k, m) if trans_a else rand(rng, m, k)
        b = rand(rng, n, k) if trans_b else rand(rng, k, n)
        shapes = {"scalar": (), "row": (n,), "column": (m, 1), "full": (m, n)}
        c = None if c_shape == "none" else rand(rng, *shapes[c_shape])
        attrs = GemmAttrs(alpha=alpha, beta=beta, trans_a=trans_a, trans_b=trans_b)
        constant = [i for i in constants if i < 2 or c is not None]
        device.check_node("Gemm", attrs, [a, b, c], constant, "gemm", k)

    check()


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_fused_gemm_applies_every_activation(device: Backend, activation: str) -> None:
    rng = np.random.default_rng(1)
    a, b, c = rand(rng, 3, 40), rand(rng, 17, 40), rand(rng, 17)
    attrs = FusedGemmAttrs(trans_b=True, activation=activation, low=-0.5, high=0.75)
    device.check_node("FusedGemm", attrs, [4 * a, b, c], (1, 2), "fused_gemm", 40)


def test_leaky_slope_is_not_gemm_alpha(device: Backend) -> None:
    rng = np.random.default_rng(1)
    a, b = rand(rng, 6, 9), rand(rng, 9, 5)
    attrs = FusedGemmAttrs(alpha=2.0, activation="leaky_relu", negative_slope=0.3)
    device.check_node("FusedGemm", attrs, [a, b], (1,), "fused_gemm", 9)


@pytest.mark.backends("cuda")
def test_seed_sized_gemm(device: Backend) -> None:
    """Seed 001's 512 x 1024 by 1024 x 512 product (no TF32 on CUDA: float32 accuracy is kept)."""
    rng = np.random.default_rng(2)
    device.check_node("Gemm", GemmAttrs(), [rand(rng, 512, 1024), rand(rng, 1024, 512)], (1,), "gemm", 1024)


SHAPES = [
    ((5, 7), (7, 3)),
    ((7,), (7, 3)),
    ((5, 7), (7,)),
    ((7,), (7,)),
    ((2, 3, 5, 7), (7, 4)),
    ((5, 7), (2, 7, 4)),
    ((2, 3, 5, 7), (2, 3, 7, 4)),
]
# OpenCL runs mixed batch broadcasting on the reference (tests/kernels/gpu/opencl/test_gemm.py); CUDA on its kernel.
MIXED_BATCH = ((2, 1, 3, 4), (1, 3, 4, 5))


@pytest.mark.per_backend(
    "a_shape, b_shape", opencl=[*SHAPES, ((1, 5, 33), (1, 33, 20))], cuda=[*SHAPES, MIXED_BATCH]
)
@pytest.mark.parametrize("constant_b", [False, True])
def test_matmul_matches_reference(
    device: Backend, a_shape: tuple[int, ...], b_shape: tuple[int, ...], constant_b: bool
) -> None:
    rng = np.random.default_rng(2)
    a, b = rand(rng, *a_shape), rand(rng, *b_shape)
    device.check_node("MatMul", None, [a, b], (1,) if constant_b else (), "matmul", a_shape[-1])
