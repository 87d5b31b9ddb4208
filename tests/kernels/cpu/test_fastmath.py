"""The vectorisable float32 exponential and sigmoid (kernels/cpu/fastmath.py) over the whole float32
range against float64, in plain compiled code and compiled with fastmath's "reassoc" (as the sparse
kernels that inline the GEMM epilogue are), the GEMM epilogue's Sigmoid and SiLU through them, and
the convolution epilogue's loops in vector code."""

from __future__ import annotations

import platform
import re

import numba
import numpy as np
import pytest

from edgecnn.kernels.cpu.conv.tiled_gemm import rows_epilogue
from edgecnn.kernels.cpu.fastmath import LOWEST, exp_nonpositive, sigmoid
from edgecnn.kernels.cpu.gemm.epilogue import ActivationKind, activate_in_place, add_activation_
from edgecnn.kernels.cpu.gemm.microkernel import target_features


def _map(t: np.ndarray, exp: np.ndarray, sig: np.ndarray) -> None:
    for i in range(t.shape[0]):
        exp[i] = exp_nonpositive(t[i]) if t[i] <= 0 or t[i] != t[i] else np.float32(0.0)
        sig[i] = sigmoid(t[i])


_PLAIN = numba.njit(_map)
_REASSOC = numba.njit(fastmath={"reassoc", "contract"})(_map)


def _float32_range() -> np.ndarray:
    """Every 997th float32 bit pattern of either sign (all exponents, mantissas of every residue),
    the infinities, both zeros, the extremes and NaNs of either sign and several payloads."""
    bits = np.arange(0, 0x7F800000, 997, dtype=np.uint32)
    magnitudes = bits.view(np.float32)
    f32 = np.finfo(np.float32)
    specials = np.array([np.inf, 0.0, f32.max, f32.tiny, 87.0, 88.7], dtype=np.float32)
    nans = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFBFFFFF], dtype=np.uint32).view(np.float32)
    positive = np.concatenate([magnitudes, specials])
    return np.concatenate([positive, -positive, nans])


def test_exp_and_sigmoid_over_the_float32_range() -> None:
    """exp: relative error below 2e-7 where float32's exp is normal (t >= -87), 0 below and at
    -inf, exactly 1 at +-0, NaN for NaN. sigmoid: relative error below 5e-7 down to -87, within
    exp(-87) under it, exactly 0 and 1 at the infinities, NaN for NaN."""
    t = _float32_range()
    with np.errstate(over="ignore", invalid="ignore"):  # signalling NaNs widen with a warning
        wide = t.astype(np.float64)
        exact_exp = np.exp(np.minimum(wide, 0.0))
        exact_sig = 1.0 / (1.0 + np.exp(-wide))
    nonpositive = (t <= 0) & (t >= LOWEST)
    flushed = t < LOWEST
    nan = np.isnan(t)
    for compiled in (_PLAIN, _REASSOC):
        exp, sig = np.empty_like(t), np.empty_like(t)
        compiled(t, exp, sig)
        assert np.all(np.abs(exp[nonpositive] - exact_exp[nonpositive]) <= 2e-7 * exact_exp[nonpositive])
        assert np.all(exp[flushed] == 0.0)
        assert np.all(exp[t == 0.0] == 1.0)
        assert np.all(np.isnan(exp[nan])) and np.all(np.isnan(sig[nan]))
        normal = ~nan & (t >= LOWEST)
        assert np.all(np.abs(sig[normal] - exact_sig[normal]) <= 5e-7 * exact_sig[normal])
        below = ~nan & ~normal
        assert np.all(np.abs(sig[below] - exact_sig[below]) <= np.exp(np.float64(LOWEST)))
        assert sig[t == np.inf][0] == 1.0 and sig[t == -np.inf][0] == 0.0
        assert np.all((sig[~nan] >= 0.0) & (sig[~nan] <= 1.0))


def test_gemm_epilogue_sigmoid_and_silu_match_float64() -> None:
    """``epilogue.activate`` (here through ``add_activation_``) keeps the reference's NaN,
    infinities (SiLU of -inf is NaN, as -inf * 0) and saturation; values below exp(-87) are flushed."""
    x = np.concatenate(
        [
            np.linspace(-120.0, 120.0, 4001, dtype=np.float32),
            np.array(
                [np.nan, np.inf, -np.inf, 0.0, -0.0, 88.0, -88.0, 1e-30, -1e-30, 3e38, -3e38],
                dtype=np.float32,
            ),
        ]
    )
    wide = x.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        exact = 1.0 / (1.0 + np.exp(-wide))
        silu = wide * exact
    for kind, expected in ((ActivationKind.SIGMOID, exact), (ActivationKind.SILU, silu)):
        out = x.copy()
        add_activation_(out, np.zeros_like(x), False, int(kind), 0.0, 0.0, 0.0)
        np.testing.assert_allclose(out, expected.astype(np.float32), rtol=6e-7, atol=1e-35)


def test_bias_in_the_activation_pass_equals_a_separate_add() -> None:
    """``rows_epilogue`` adds each row's bias inside the activation's loop (``activate_in_place``'s
    offset): bit for bit the bias added first, on rows of a 7x7 map; without an offset the values
    are left as they are, -0.0 included (LeakyRelu keeps it)."""
    rng = np.random.default_rng(2)
    block = (rng.standard_normal((3, 49)) * 4).astype(np.float32)
    block[0, :3] = [np.nan, np.inf, -np.inf]
    bias = rng.standard_normal(3).astype(np.float32)
    for kind in ActivationKind:
        if kind in (ActivationKind.NONE, ActivationKind.RELU, ActivationKind.CLIP):
            continue  # rows_epilogue's own loops
        fused, separate = block.copy(), (block + bias[:, None]).reshape(-1)
        rows_epilogue(fused, 0, 3, 0, 49, bias, True, int(kind), 0.2, 0.1, 0.9)
        activate_in_place(separate, np.uint64(0), np.uint64(separate.size), int(kind), 0.2, 0.1, 0.9)
        np.testing.assert_array_equal(fused.reshape(-1), separate, err_msg=kind.name)
    zeros = np.array([-0.0, 0.0, -1.0], np.float32)
    activate_in_place(zeros, np.uint64(0), np.uint64(3), int(ActivationKind.LEAKY_RELU), 0.5, 0.0, 0.0)
    assert np.signbit(zeros[0]) and not np.signbit(zeros[1]) and zeros[2] == -0.5


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="reads x86 assembly")
def test_gemm_conv_epilogue_vectorises_sigmoid_and_silu() -> None:
    """The pointwise and im2col convolutions' epilogue (``rows_epilogue``), compiled afresh as the
    kernels compile it, has no exp call and converts floats to integers a vector at a time (the
    exponential's rounding) in both its Sigmoid and its SiLU loop; on a CPU with FMA, the
    exponential's multiply-adds are fused ones."""
    fresh = numba.njit(rows_epilogue.py_func)
    block = np.zeros((2, 40), np.float32)
    fresh(block, 0, 2, 0, 40, np.zeros(2, np.float32), True, int(ActivationKind.SILU), 0.0, 0.0, 0.0)
    (asm,) = fresh.inspect_asm().values()
    assert "exp" not in asm.lower()
    assert len(re.findall(r"\bv?cvttps2dq\b", asm)) >= 2
    if "+fma" in target_features():
        assert len(re.findall(r"\bvfn?madd\d+ps\b", asm)) >= 14
