"""QLinearLRN (Q(LRN(DQ(x))) on 8-bit codes): the compiled kernel equals the reference (the float
graph of edgecnn.ops) on random shapes, window sizes, betas, scales and zero points to their limits,
and onnxruntime's DequantizeLinear -> LRN -> QuantizeLinear, except by one code where the exact
quotient lies within float32 rounding of a half-way point (float LRNs round it either way)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from edgecnn.errors import EdgeCNNError
from edgecnn.kernels.cpu.int8.lrn import PIXEL_BAND, balanced_band
from edgecnn.ops.norm import LRNAttrs
from edgecnn.ops.quant import QuantizeAttrs, dequantize_linear, qlinear_lrn
from edgecnn.testing import reference_run
from kernels.cpu.int8.test_int8_eltwise import SETTINGS, codes, parameters
from kernels.support import fast_run
from onnx_support import run_onnxruntime

GOOGLENET = LRNAttrs(size=5, alpha=1e-4, beta=0.75, bias=1.0)


def exact_quotients(
    attrs: LRNAttrs, x: np.ndarray, x_scale: np.ndarray, x_zp: np.ndarray, y_scale: np.ndarray
) -> np.ndarray:
    """LRN(DQ(x)) / y_scale without rounding the LRN to float32: where it lies within float
    rounding of a half-way point, float LRNs that round differently may quantise one code apart."""
    v = dequantize_linear(QuantizeAttrs(), x, x_scale, x_zp).astype(np.float64)
    before = (attrs.size - 1) // 2
    padded = np.pad(v * v, [(0, 0), (before, attrs.size - 1 - before)] + [(0, 0)] * (x.ndim - 2))
    window = sum(padded[:, k : k + x.shape[1]] for k in range(attrs.size))
    return v / (attrs.bias + attrs.alpha / attrs.size * window) ** attrs.beta / np.float64(y_scale)


def assert_codes_match(
    got: np.ndarray, expected: np.ndarray, quotients: np.ndarray, zero: int, tolerance: float
) -> int:
    """Equal codes, or one apart where the quotient is within ``tolerance`` (relative) of a half-way
    point; the number of those."""
    info = np.iinfo(got.dtype)
    differ = got != expected
    if not differ.any():
        return 0
    assert np.abs(got.astype(np.int32) - expected.astype(np.int32)).max() == 1
    q = quotients[differ]
    distance = np.abs(q - np.floor(q) - 0.5)
    saturated = (q + zero < info.min - 0.5) | (q + zero > info.max + 0.5)
    assert not saturated.any()
    assert (distance <= tolerance * np.maximum(np.abs(q), 1.0)).all(), distance.max()
    return int(differ.sum())


@st.composite
def lrn_cases(draw: st.DrawFn) -> tuple[LRNAttrs, list[np.ndarray], int]:
    dtype = draw(st.sampled_from(["uint8", "int8"]))
    shape = (
        draw(st.integers(1, 2)),
        draw(st.integers(1, 9)),
        draw(st.integers(1, 24)),  # up to 960 pixels: several bands of the kernel
        draw(st.integers(1, 40)),
    )
    attrs = LRNAttrs(
        size=draw(st.integers(1, 6)),
        alpha=draw(st.sampled_from([1e-4, 0.5, 20.0])),
        beta=draw(st.sampled_from([0.75, 0.5, 1.3])),
        bias=draw(st.sampled_from([1.0, 2.0, 0.01])),
    )
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = codes(rng, shape, dtype)
    info = np.iinfo(dtype)
    if draw(st.booleans()):  # runs of the limits
        x.reshape(-1)[:: draw(st.integers(2, 5))] = draw(st.sampled_from([info.min, info.max]))
    x_scale, x_zp, y_scale, y_zp = draw(parameters(dtype, 2))
    return attrs, [x, x_scale, x_zp, y_scale, y_zp], draw(st.integers(1, 2))


@SETTINGS
@given(case=lrn_cases())
def test_compiled_lrn_equals_the_reference(case: tuple[LRNAttrs, list[np.ndarray], int]) -> None:
    attrs, inputs, threads = case
    got, kernel = fast_run("QLinearLRN", attrs, inputs, (1, 2, 3, 4), threads)
    assert kernel == "int8_lrn"
    expected = qlinear_lrn(attrs, *inputs)
    x, x_scale, x_zp, y_scale, y_zp = inputs
    quotients = exact_quotients(attrs, x, x_scale, x_zp, y_scale)
    # the kernel's float32 LRN is a few float32 roundings (< 1e-6 relative) off the exact one
    assert_codes_match(got, expected, quotients, int(y_zp), 2e-6)


def test_extremes_saturate_like_the_reference() -> None:
    """Codes at the limits, zero points at the limits and in the middle, a small output scale: the
    outputs saturate at both ends exactly as the reference's."""
    for dtype in ("uint8", "int8"):
        info = np.iinfo(dtype)
        middle = (int(info.min) + int(info.max) + 1) // 2
        row = np.array([info.min, info.max, info.min, info.max, middle], dtype)
        x = np.tile(row, 3 * 2 * 7).reshape(1, 6, 5, 7)
        for zero in (int(info.min), int(info.max), middle):
            params = [np.float32(1.0), np.array(zero, dtype), np.float32(0.01), np.array(middle, dtype)]
            got, _ = fast_run("QLinearLRN", GOOGLENET, [x, *params], (1, 2, 3, 4), 1)
            np.testing.assert_array_equal(got, qlinear_lrn(GOOGLENET, x, *params))
            if zero == middle:
                assert {int(info.min), int(info.max)} <= set(np.unique(got).tolist())


def test_half_way_points_round_to_even() -> None:
    """alpha 0, bias 1: the LRN is the identity, and with y's scale twice x's every odd code
    difference is a half-way point, exact in float32: rounded to even as the reference rounds."""
    attrs = LRNAttrs(size=3, alpha=0.0, beta=0.75, bias=1.0)
    x = np.arange(256, dtype=np.uint8).reshape(1, 4, 8, 8)
    params = [np.float32(0.5), np.array(101, np.uint8), np.float32(1.0), np.array(7, np.uint8)]
    got, _ = fast_run("QLinearLRN", attrs, [x, *params], (1, 2, 3, 4), 1)
    expected = qlinear_lrn(attrs, x, *params)
    np.testing.assert_array_equal(got, expected)
    difference = x.astype(np.int32) - 101
    odd = difference % 2 == 1
    np.testing.assert_array_equal(expected[odd], np.clip(np.rint(difference[odd] / 2) + 7, 0, 255))


def qdq_lrn_model(attrs: LRNAttrs, params: list[np.ndarray], shape: tuple[int, ...]) -> object:
    elem = TensorProto.UINT8 if params[1].dtype == np.uint8 else TensorProto.INT8
    nodes = [
        helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["v"]),
        helper.make_node(
            "LRN", ["v"], ["l"], size=attrs.size, alpha=attrs.alpha, beta=attrs.beta, bias=attrs.bias
        ),
        helper.make_node("QuantizeLinear", ["l", "ys", "yz"], ["y"]),
    ]
    inits = [
        numpy_helper.from_array(np.asarray(value), name)
        for name, value in zip(("xs", "xz", "ys", "yz"), params, strict=True)
    ]
    graph = helper.make_graph(
        nodes,
        "qdq_lrn",
        [helper.make_tensor_value_info("x", elem, list(shape))],
        [helper.make_tensor_value_info("y", elem, list(shape))],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize(
    ("attrs", "dtype", "params"),
    [
        (GOOGLENET, "uint8", (0.05, 0, 0.05, 0)),  # GoogLeNet's: after a ReLU, one scale
        (LRNAttrs(size=3, alpha=0.5, beta=0.75, bias=2.0), "uint8", (0.03, 128, 0.004, 10)),
        (LRNAttrs(size=7, alpha=2.0, beta=0.6, bias=1.0), "int8", (0.02, -5, 0.003, 3)),
    ],
    ids=["googlenet", "size3", "size7-int8"],
)
def test_equals_onnxruntime_but_for_float_ties(
    attrs: LRNAttrs, dtype: str, params: tuple[float, int, float, int]
) -> None:
    shape = (1, 32, 28, 28)
    x = codes(np.random.default_rng(7), shape, dtype)
    inputs = [
        np.float32(params[0]),
        np.array(params[1], dtype),
        np.float32(params[2]),
        np.array(params[3], dtype),
    ]
    got, kernel = fast_run("QLinearLRN", attrs, [x, *inputs], (1, 2, 3, 4), 2)
    assert kernel == "int8_lrn"
    (expected,) = run_onnxruntime(qdq_lrn_model(attrs, inputs, shape), {"x": x})
    quotients = exact_quotients(attrs, x, inputs[0], inputs[1], inputs[2])
    # onnxruntime's float32 LRN (running sums, pow) is a few float32 roundings off the exact one
    ties = assert_codes_match(got, expected, quotients, int(params[3]), 2e-6)
    assert ties <= x.size // 1000


def test_rejects_bad_input() -> None:
    x = codes(np.random.default_rng(1), (1, 4, 3, 3), "uint8")
    with pytest.raises(EdgeCNNError, match="size"):
        reference_run(
            "QLinearLRN", LRNAttrs(size=0), [x, np.float32(0.1), np.uint8(0), np.float32(0.1), np.uint8(0)]
        )
    with pytest.raises(EdgeCNNError, match=r"8-bit type|share"):
        reference_run("QLinearLRN", GOOGLENET, [x, np.float32(0.1), np.uint8(0), np.float32(0.1), np.int8(0)])


@pytest.mark.parametrize(
    ("pixels", "images", "workers", "band"),
    [(3136, 1, 2, 392), (3136, 1, 1, 448), (784, 1, 2, 392), (630, 2, 2, 315), (49, 1, 2, 25), (7, 3, 2, 4)],
)
def test_bands_split_evenly_over_the_workers(pixels: int, images: int, workers: int, band: int) -> None:
    got = balanced_band(pixels, images, workers)
    assert got == band and got <= PIXEL_BAND
    tasks = images * -(-pixels // got)
    assert tasks % workers == 0
