"""OpenCL's own GEMM: every kernel variant called directly, the variant choice, the activation
parameters of FusedGemm, and MatMul's fallback for mixed batch broadcasting. What every backend must
do for Gemm / FusedGemm / MatMul is in tests/kernels/gpu/backends/test_dense.py."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgecnn.kernels.gpu.activations import activation_params
from edgecnn.kernels.opencl import DeviceArray, get_device
from edgecnn.kernels.opencl.gemm import (
    NO_WRAP,
    VARIANTS,
    Epilogue,
    Operand,
    choose_variant,
    enqueue_gemm,
    padded_columns,
)
from edgecnn.ops.fused import FusedGemmAttrs
from edgecnn.testing import reference_run
from kernels.gpu.backends.support import rand
from kernels.gpu.opencl.support import OPENCL

SIZES = st.integers(1, 37)


@settings(max_examples=25, deadline=None)
@given(
    m=SIZES,
    n=SIZES,
    k=SIZES,
    batches=st.integers(1, 3),
    trans_a=st.booleans(),
    trans_b=st.booleans(),
    seed=st.integers(0, 99),
)
def test_every_variant_multiplies_batched_and_transposed_operands(
    m: int, n: int, k: int, batches: int, trans_a: bool, trans_b: bool, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    device = get_device(0)
    a, b = rand(rng, batches, m, k), rand(rng, batches, k, n)
    bias = rand(rng, m)  # one per row, the conv layout
    stored_a = np.ascontiguousarray(a.transpose(0, 2, 1)) if trans_a else a
    stored_b = np.ascontiguousarray(b.transpose(0, 2, 1)) if trans_b else b
    a_layout = Operand.col_major(m, k, batched=True) if trans_a else Operand.row_major(m, k, batched=True)
    b_layout = Operand.col_major(k, n, batched=True) if trans_b else Operand.row_major(k, n, batched=True)
    da, db, dbias = (DeviceArray.upload(device, v) for v in (stored_a, stored_b, bias))
    expected = 0.5 * (a @ b) + 2.0 * bias[:, None]
    for variant in VARIANTS:
        if variant == "blocked":  # row-major operands, B's rows padded to whole float8s
            padded = np.zeros((batches, k, padded_columns(n)), np.float32)
            padded[:, :, :n] = b
            da, db = DeviceArray.upload(device, a), DeviceArray.upload(device, padded)
            a_layout = Operand.row_major(m, k, batched=True)
            b_layout = Operand(padded.shape[2], 1, NO_WRAP, k * padded.shape[2])
        y = DeviceArray.empty(device, (batches, m, n))
        enqueue_gemm(device, variant, m, n, k, batches, da.buffer, a_layout, db.buffer, b_layout, y.buffer,
                     0, dbias.buffer, Operand(1, 0), Epilogue(0.5, 2.0))  # fmt: skip
        np.testing.assert_allclose(y.get(), expected, rtol=1e-4, atol=1e-5 * k, err_msg=variant)


def test_a_shared_left_operand_wraps_with_batch_mod() -> None:
    """Conv groups: batch b uses weights block b % groups."""
    rng = np.random.default_rng(0)
    device = get_device(0)
    groups, images, m, n, k = 3, 2, 5, 8, 6
    w, cols = rand(rng, groups, m, k), rand(rng, images * groups, k, n)
    dw, dc = DeviceArray.upload(device, w), DeviceArray.upload(device, cols)
    for variant in VARIANTS:
        y = DeviceArray.empty(device, (images * groups, m, n))
        enqueue_gemm(device, variant, m, n, k, images * groups, dw.buffer, Operand(k, 1, groups, m * k),
                     dc.buffer, Operand.row_major(k, n, batched=True), y.buffer)  # fmt: skip
        expected = np.stack([w[b % groups] @ cols[b] for b in range(images * groups)])
        np.testing.assert_allclose(y.get(), expected, rtol=1e-4, atol=1e-5 * k, err_msg=variant)


def test_unknown_variant_is_refused() -> None:
    device = get_device(0)
    x = DeviceArray.empty(device, (1,))
    with pytest.raises(ValueError, match="unknown GEMM variant 'fast'"):
        enqueue_gemm(device, "fast", 1, 1, 1, 1, x.buffer, Operand(1, 1), x.buffer, Operand(1, 1), x.buffer)


def test_variant_choice_by_size() -> None:
    assert choose_variant(512, 512, 1024, blockable=True) == "blocked"
    assert choose_variant(512, 512, 1024) == "tiled"
    assert choose_variant(2, 512, 1024, blockable=True) == "vec4"  # too few rows to block or tile
    assert choose_variant(512, 512, 1024, blockable=True, cpu=False) == "tiled"  # GPUs: tiles
    assert choose_variant(1, 500, 800) == "vec4"  # one row: nothing to tile
    assert choose_variant(3, 3, 3) == "scalar"


def test_leaky_slope_is_not_gemm_alpha() -> None:
    attrs = FusedGemmAttrs(alpha=2.0, activation="leaky_relu", negative_slope=0.3)
    assert activation_params(attrs)[1] == np.float32(0.3)


def test_matmul_with_mixed_batch_broadcasting_falls_back_to_the_reference() -> None:
    rng = np.random.default_rng(3)
    a, b = rand(rng, 2, 1, 3, 4), rand(rng, 1, 3, 4, 5)
    actual, kernel = OPENCL.run("MatMul", None, [a, b])
    assert kernel == "reference"
    np.testing.assert_allclose(actual, reference_run("MatMul", None, [a, b]), rtol=1e-6)
