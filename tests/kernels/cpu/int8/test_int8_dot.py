"""The dot-product int8 convolution (kernels/cpu/int8/dot_*.py): the saturation bound and the
weight split with fix-ups that keep `vpmaddubsw` exact, exact integers against the numpy reference
at the 8-bit extremes with both loops and both layouts, the compiled DequantizeLinear, QDQ networks
bit-exact with onnxruntime and the reference, and all of it again with numba compiling for an
AVX2-only CPU (the `vpmaddubsw` loop this machine does not take where it has VNNI)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numba
import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from edgecnn.importers.onnx.reader import graph_from_model_proto
from edgecnn.kernels.cpu.int8.dot_conv import Int8DotConvKernel  # registers the kernel too
from edgecnn.kernels.cpu.int8.dot_gemm import pack_weights, tap_weights
from edgecnn.kernels.cpu.int8.dot_kernel import (
    COLUMNS,
    FIX_LIMIT,
    LANES,
    PAIR_LIMIT,
    ROWS,
    UNIT_S16,
    UNIT_U8S8,
    VECTORS,
    VNNI,
    FixUps,
    available,
    bytes_split,
    dot_s16,
    dot_u8s8,
    fix_ups,
    pairs_fit_int16,
    split_pairs,
)
from edgecnn.kernels.cpu.tuning_record import active_cpu_tuning
from edgecnn.model import Model
from edgecnn.ops.quant import Int8ConvAttrs, QuantizeAttrs
from edgecnn.runtime.options import RuntimeOptions
from edgecnn.testing import reference_run
from kernels.support import fast_run
from onnx_support import run_onnxruntime

pytestmark = pytest.mark.skipif(not available(), reason="numba does not compile for AVX2 here")

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CONSTANTS = (1, 2, 3, 4, 5, 6, 7, 8)


def saturates(weights: np.ndarray) -> bool:
    """Whether vpmaddubsw's int16 pair sum leaves int16 for some u8 activations: the sum is linear
    in each activation, so its extremes are at the corners {0, 255}^2 of each pair."""
    w = weights.astype(np.int64)
    if w.shape[1] % 2:
        w = np.pad(w, ((0, 0), (0, 1)))
    pairs = w.reshape(w.shape[0], -1, 2)
    for x0, x1 in itertools.product((0, 255), repeat=2):
        sums = x0 * pairs[..., 0] + x1 * pairs[..., 1]
        if sums.max(initial=0) > 32767 or sums.min(initial=0) < -32768:
            return True
    return False


@given(st.integers(1, 4), st.integers(1, 9), st.integers(0, 2**32 - 1), st.sampled_from([64, 100, 128]))
def test_pairs_fit_int16_is_exactly_the_saturation_bound(
    rows: int, depth: int, seed: int, reach: int
) -> None:
    rng = np.random.default_rng(seed)
    w = rng.integers(-reach, min(reach, 127) + 1, (rows, depth)).astype(np.int8)
    assert pairs_fit_int16(w) == (not saturates(w))


def test_pair_limit_edges() -> None:
    """64 + 64 = PAIR_LIMIT fits (255 * 128 = 32640); 127 + 2 does not; -128 alone fits."""
    assert PAIR_LIMIT == 128
    assert pairs_fit_int16(np.array([[64, 64, -64, -64]], np.int8))
    assert not pairs_fit_int16(np.array([[127, 2]], np.int8))
    assert not pairs_fit_int16(np.array([[-127, -2]], np.int8))
    assert pairs_fit_int16(np.array([[-128, 0, 127, -128]], np.int8))


def test_split_pairs_is_exact_and_fits_for_every_pair() -> None:
    """Every one of the 65536 pairs of int8 weights: main + fix is the pair, both fit the bound,
    and the pairs that fit already are left whole."""
    values = np.arange(-128, 128)
    w = np.stack(np.meshgrid(values, values), axis=-1).reshape(-1, 2).astype(np.int8)
    main, fix = split_pairs(w)
    assert main.dtype == fix.dtype == np.int8
    np.testing.assert_array_equal(main.astype(np.int16) + fix, w)
    assert pairs_fit_int16(main) and pairs_fit_int16(fix)
    fits = np.array([pairs_fit_int16(pair[None]) for pair in w])
    np.testing.assert_array_equal(main[fits], w[fits])
    assert not fix[fits].any() and fix[~fits].any(axis=1).all()


def test_bytes_split_takes_the_int16_loop_for_many_fix_ups() -> None:
    """Full-range weights need a fix-up in most groups: the int16 loop, unless `vpdpbusd` sums them
    (VNNI: no fix-ups); a few large weights among small ones: the u8 x s8 loop."""
    rng = np.random.default_rng(2)
    dense = rng.choice([-128, 127], (8, 64)).astype(np.int8)
    sparse = rng.integers(-20, 21, (8, 64)).astype(np.int8)
    sparse[3, 5] = -128
    sparse[3, 4] = -100
    if VNNI:
        for w in (dense, sparse):
            main, fix = bytes_split(w) or (None, None)
            assert main is w and fix is not None and not fix.any()
        return
    assert bytes_split(dense) is None
    split = bytes_split(sparse)
    assert split is not None and split[1].any()
    assert fix_ups(split[1], 8, np.arange(16, dtype=np.int64)).starts.tolist() == [0, 1, 1]
    assert FIX_LIMIT > 1 / 16  # one fixed group of sixteen per panel, on average


@numba.njit(cache=True)
def one_block(
    bytes_mode: bool, vectors: int, groups: int, a: np.ndarray, b: np.ndarray, rows: np.ndarray, c: np.ndarray,
    fixes: FixUps,
) -> None:  # fmt: skip
    """One micro-kernel call at offset 0 (ldc = COLUMNS), the first panel's fix-ups after it."""
    starts, units, taps = fixes
    if bytes_mode:
        dot_u8s8(
            vectors, groups, a, 0, b, 0, rows, c, 0, COLUMNS, starts[1] - starts[0], units, taps, starts[0]
        )
    else:
        dot_s16(vectors, groups, a, 0, b, 0, rows, c, 0, COLUMNS)


@pytest.mark.parametrize("bytes_mode", [True, False], ids=["u8s8", "s16"])
def test_every_block_width_sums_exactly(bytes_mode: bool) -> None:
    """The micro-kernel's ROWS x (LANES * vectors) block, for each width it has, equals the integer
    product at the 8-bit extremes (7-bit weights for `vpmaddubsw` without VNNI), B's rows apart by
    an uneven stride; the columns past the block are left alone."""
    rng = np.random.default_rng(3)
    unit = UNIT_U8S8 if bytes_mode else UNIT_S16
    groups = 7
    reach = 64 if bytes_mode else 128
    a = rng.choice([-reach, reach - 1, 0, 1], (ROWS, groups * unit)).astype(np.int8)
    x = rng.choice([0, 255, 1, 128], (groups * unit, COLUMNS)).astype(np.uint8)
    stride = 4 * COLUMNS + 12  # bytes from one group's row to the next
    b = np.zeros(groups * stride, np.uint8)
    for g in range(groups):  # pixel j's unit at bytes 4j..4j+3 of row g
        steps = x[g * unit : (g + 1) * unit].T.astype(np.uint8 if bytes_mode else np.int16)
        b[g * stride : g * stride + 4 * COLUMNS] = np.ascontiguousarray(steps).view(np.uint8).reshape(-1)
    rows = np.arange(groups, dtype=np.int64) * stride
    expected = a.astype(np.int64) @ x.astype(np.int64)
    for vectors in range(1, VECTORS + 1):
        c = np.full(ROWS * COLUMNS, -7, np.int32)
        one_block(bytes_mode, vectors, groups, pack_weights(a, unit), b, rows, c, fix_ups(None, ROWS, rows))
        sums = c.reshape(ROWS, COLUMNS)
        np.testing.assert_array_equal(sums[:, : LANES * vectors], expected[:, : LANES * vectors])
        assert (sums[:, LANES * vectors :] == -7).all()


def test_fix_ups_make_bytes_exact_at_the_extremes() -> None:
    """Full-range weights (-128 and 127 beside each other: pairs that saturate `vpmaddubsw`) on
    the u8 x s8 loop as main weights and fix-up groups: every block width equals the integer
    product for activations at 0 and 255, a panel's fix-ups only, one panel's rows short."""
    rng = np.random.default_rng(4)
    groups, rows_used = 9, ROWS - 1
    a = rng.choice([-128, 127, -127, 1, 0], (rows_used, groups * UNIT_U8S8)).astype(np.int8)
    a[:, : 2 * UNIT_U8S8] = rng.integers(-30, 31, (rows_used, 2 * UNIT_U8S8))  # groups without fix-ups
    x = rng.choice([0, 255, 254, 1], (groups * UNIT_U8S8, COLUMNS)).astype(np.uint8)
    stride = 4 * COLUMNS + 20
    b = np.zeros(groups * stride, np.uint8)
    for g in range(groups):
        b[g * stride : g * stride + 4 * COLUMNS] = np.ascontiguousarray(x[4 * g : 4 * g + 4].T).reshape(-1)
    rows = np.arange(groups, dtype=np.int64) * stride
    main, fix = split_pairs(a)
    fixes = fix_ups(fix, rows_used, rows)
    assert 0 < fixes.starts[1] < groups and fixes.starts.tolist() == [0, fixes.starts[1]]
    assert not pairs_fit_int16(a) and pairs_fit_int16(main) and pairs_fit_int16(fix)
    expected = a.astype(np.int64) @ x.astype(np.int64)
    for vectors in range(1, VECTORS + 1):
        c = np.full(ROWS * COLUMNS, -7, np.int32)
        one_block(True, vectors, groups, pack_weights(main, UNIT_U8S8), b, rows, c, fixes)
        sums = c.reshape(ROWS, COLUMNS)
        np.testing.assert_array_equal(sums[:rows_used, : LANES * vectors], expected[:, : LANES * vectors])
        assert (sums[:, LANES * vectors :] == -7).all()


def extreme(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """8-bit values, half of them at the type's ends."""
    info = np.iinfo(dtype)
    values = rng.integers(info.min, info.max + 1, shape)
    ends = rng.choice([info.min, info.max], shape)
    return np.where(rng.random(shape) < 0.5, ends, values).astype(dtype)


@st.composite
def conv_cases(draw: st.DrawFn, unpadded: bool = False) -> tuple[Int8ConvAttrs, list[Any], bool]:
    """One-group layers over odd sizes, unit or other strides, with 7-bit weights (the u8 x s8
    loop), full-range ones including -128 (the int16 loop without VNNI) or a few full-range ones
    among small ones, as trained layers have (the u8 x s8 loop and its fix-ups, or the int16 loop
    where they would be too many), data and zero points at the ends, no activation, ReLU or ReLU6
    (Clip); ``unpadded``: unit strides and no padding (1x1 layers mostly), packed as one run per
    unit."""
    in_channels, out_channels = draw(st.integers(1, 9)), draw(st.integers(1, 11))
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    if unpadded:
        kernel = draw(st.sampled_from([(1, 1), (1, 1), kernel]))
    strides = (1, 1) if unpadded else draw(st.sampled_from([(1, 1), (1, 1), (2, 2), (1, 2), (3, 2)]))
    dilations = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    pads = (0, 0, 0, 0) if unpadded else tuple(draw(st.integers(0, 2)) for _ in range(4))
    spans = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    height = draw(st.integers(max(1, spans[0] - pads[0] - pads[2]), 21))
    width = draw(st.integers(max(1, spans[1] - pads[1] - pads[3]), 37))
    x_dtype = draw(st.sampled_from(["uint8", "int8"]))
    style = draw(st.sampled_from(["seven_bit", "full", "few"]))
    seven_bit = style == "seven_bit"
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    w_shape = (out_channels, in_channels, *kernel)
    w = rng.choice([-64, 64], w_shape) if seven_bit else extreme(rng, w_shape, "int8")
    if style == "few":
        w = np.where(
            rng.random(w_shape) < 0.04, rng.choice([-128, 127], w_shape), rng.integers(-30, 31, w_shape)
        )
    w = np.where(rng.random(w_shape) < 0.5, w, rng.integers(-64, 64, w_shape)).astype(np.int8)
    info = np.iinfo(x_dtype)
    x_zp = np.array(draw(st.sampled_from([int(info.min), int(info.max), 0, 3])), dtype=x_dtype)
    activation = draw(
        st.sampled_from([{}, {"activation": "relu"}, {"activation": "clip", "low": 0.0, "high": 6.0}])
    )
    attrs = Int8ConvAttrs(kernel_shape=kernel, strides=strides, dilations=dilations, pads=pads, **activation)
    int8_out = draw(st.booleans())
    bias = rng.integers(-(2**20), 2**20, out_channels).astype(np.int32) if draw(st.booleans()) else None
    inputs = [
        extreme(rng, (draw(st.integers(1, 2)), in_channels, height, width), x_dtype),
        np.float32(0.02),
        x_zp,
        w,
        rng.uniform(1e-3, 2e-2, out_channels).astype(np.float32),
        np.zeros(out_channels, np.int8),
        np.float32(draw(st.sampled_from([0.5, 4.0, 60.0]))) if int8_out else None,
        np.uint8(draw(st.sampled_from([0, 128, 255]))) if int8_out else None,
        bias,
    ]
    return attrs, inputs, seven_bit


@SETTINGS
@given(conv_cases(), st.sampled_from([1, 2]))
def test_dot_conv_equals_reference_at_the_extremes(
    case: tuple[Int8ConvAttrs, list[Any], bool], threads: int
) -> None:
    check_dot_conv(case, threads)


@settings(SETTINGS, max_examples=15)
@given(conv_cases(unpadded=True), st.sampled_from([1, 2]))
def test_unpadded_dot_conv_equals_reference(
    case: tuple[Int8ConvAttrs, list[Any], bool], threads: int
) -> None:
    check_dot_conv(case, threads)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(
    ("in_channels", "out_channels", "stride", "hw"), [(8, 37, 1, (26, 30)), (16, 40, 2, (29, 31))]
)
def test_layers_split_over_threads_equal_reference(
    in_channels: int, out_channels: int, stride: int, hw: tuple[int, int], threads: int
) -> None:
    """Layers too large for one thread's share (the hypothesis cases are): tiles of uneven block
    counts and panel chunks of uneven sizes, shared by the threads, cover every output once."""
    rng = np.random.default_rng(in_channels)
    w_shape = (out_channels, in_channels, 3, 3)
    attrs = Int8ConvAttrs(kernel_shape=(3, 3), strides=(stride, stride), pads=(1, 1, 1, 1), activation="relu")
    inputs = [
        extreme(rng, (1, in_channels, *hw), "uint8"),
        np.float32(0.02),
        np.array(3, np.uint8),
        extreme(rng, w_shape, "int8"),
        rng.uniform(1e-3, 2e-2, out_channels).astype(np.float32),
        np.zeros(out_channels, np.int8),
        np.float32(4.0),
        np.uint8(128),
        rng.integers(-(2**20), 2**20, out_channels).astype(np.int32),
    ]
    fast, kernel = fast_run("Int8Conv", attrs, inputs, CONSTANTS, threads)
    assert kernel == "int8_dot_conv"
    assert fast.size * in_channels * 9 >= active_cpu_tuning().gemm_grain  # not run on one thread
    np.testing.assert_array_equal(fast, reference_run("Int8Conv", attrs, inputs, CONSTANTS))


def check_dot_conv(case: tuple[Int8ConvAttrs, list[Any], bool], threads: int) -> None:
    """The layer on int8_dot_conv equals the reference: exactly for 8-bit output, to float32
    rounding for float output (the same operations in the same order)."""
    attrs, inputs, seven_bit = case
    w = inputs[3]
    assert pairs_fit_int16(tap_weights(w, 4)) or not seven_bit
    fast, kernel = fast_run("Int8Conv", attrs, inputs, CONSTANTS, threads)
    expected = reference_run("Int8Conv", attrs, inputs, CONSTANTS)
    assert kernel == "int8_dot_conv"
    if inputs[6] is None:  # float output: the same float32 operations in the same order
        np.testing.assert_allclose(fast, expected, rtol=1e-6, atol=1e-6)
    else:
        np.testing.assert_array_equal(fast, expected)


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_dequantize_kernel_matches_reference(dtype: str) -> None:
    rng = np.random.default_rng(5)
    x = extreme(rng, (2, 3, 17, 19), dtype)
    zp = np.array(np.iinfo(dtype).max, dtype=dtype)
    inputs = [x, np.float32(0.037), zp]
    fast, kernel = fast_run("DequantizeLinear", QuantizeAttrs(), inputs, (1, 2), 2)
    assert kernel == "dequantize_int8"
    np.testing.assert_array_equal(fast, reference_run("DequantizeLinear", QuantizeAttrs(), inputs, (1, 2)))


def residual_net(rng: np.random.Generator) -> onnx.ModelProto:
    """A ResNet-style float network: a 3x3 stem, a basic block (two 3x3 convolutions and the
    residual Add), a strided 3x3 and a 1x1 convolution; 19x23 input, odd on purpose."""

    def weight(name: str, *shape: int) -> onnx.TensorProto:
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        value = rng.standard_normal(shape).astype(np.float32) * np.float32(np.sqrt(2.0 / fan_in))
        return numpy_helper.from_array(value, name)

    conv = helper.make_node
    nodes = [
        conv("Conv", ["x", "w0", "b0"], ["c0"], pads=[1, 1, 1, 1]),
        conv("Relu", ["c0"], ["r0"]),
        conv("Conv", ["r0", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        conv("Relu", ["c1"], ["r1"]),
        conv("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        conv("Add", ["c2", "r0"], ["s"]),
        conv("Relu", ["s"], ["r2"]),
        conv("Conv", ["r2", "w3", "b3"], ["c3"], pads=[1, 1, 1, 1], strides=[2, 2]),
        conv("Relu", ["c3"], ["r3"]),
        conv("Conv", ["r3", "w4", "b4"], ["y"]),
    ]
    weights = [weight("w0", 16, 3, 3, 3), weight("b0", 16), weight("w1", 16, 16, 3, 3), weight("b1", 16)]
    weights += [weight("w2", 16, 16, 3, 3), weight("b2", 16), weight("w3", 24, 16, 3, 3), weight("b3", 24)]
    weights += [weight("w4", 10, 24, 1, 1), weight("b4", 10)]
    graph = helper.make_graph(
        nodes,
        "resnetish",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 19, 23])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10, 10, 12])],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def quantized_block(folder: Path, rng: np.random.Generator, reduce_range: bool) -> onnx.ModelProto:
    """residual_net quantised by quantize_static (QDQ, u8 activations, per-channel s8 weights, 7-bit
    with ``reduce_range``), calibrated on four seeded inputs."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    onnx.save(residual_net(rng), folder / "float.onnx")
    samples = [{"x": rng.standard_normal((1, 3, 19, 23)).astype(np.float32)} for _ in range(4)]

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.items = iter(samples)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.items, None)

    quantize_static(
        str(folder / "float.onnx"),
        str(folder / "qdq.onnx"),
        Reader(),
        quant_format=QuantFormat.QDQ,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
        per_channel=True,
        reduce_range=reduce_range,
    )
    return onnx.load(folder / "qdq.onnx")


def test_qdq_resnet_block_equals_onnxruntime(tmp_path: Path) -> None:
    """quantize_static (QDQ, u8 activations, per-channel 7-bit weights: reduce_range, so that
    onnxruntime's own u8 x s8 path does not saturate): every convolution runs on the u8 x s8 loop
    and its quantised output (the residual block's sum, for the one that adds it) equals
    onnxruntime's."""
    rng = np.random.default_rng(11)
    qdq = quantized_block(tmp_path, rng, reduce_range=True)
    model = Model(graph_from_model_proto(qdq, "qdq.onnx"), RuntimeOptions.resolve(threads=2))
    x = rng.standard_normal((1, 3, 19, 23)).astype(np.float32)
    plan = model.plan_for({"x": x})
    convs = [s for s in plan.steps if s.node.op in ("QLinearConv", "QLinearConvAdd")]
    kernels = [s.kernel.name for s in convs]
    # the block's residual Add is in its second convolution's epilogue (fuse_int8_residual)
    assert kernels.count("int8_dot_conv") == 4 and kernels.count("int8_dot_conv_add") == 1
    assert all(Int8DotConvKernel(s.node, *inputs_of(plan, s)).bytes_mode for s in convs)
    names = [s.node.outputs[0] for s in convs]
    probe = onnx.ModelProto()
    probe.CopyFrom(qdq)
    probe.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names)
    expected = run_onnxruntime(probe, {"x": x})[len(qdq.graph.output) :]
    got = model.run({"x": x}, outputs=names)
    for name, value in zip(names, expected):
        np.testing.assert_array_equal(got[name], value, err_msg=name)


def inputs_of(plan: Any, step: Any) -> tuple[list[Any], list[Any]]:
    """The planned input types and constant values of ``step``'s node."""
    node = step.node
    return [plan.types.get(i) if i else None for i in node.inputs], [
        plan.constants.get(i) if i else None for i in node.inputs
    ]


def test_full_range_qdq_resnet_block_equals_the_reference(tmp_path: Path) -> None:
    """quantize_static with full-range 8-bit weights (no reduce_range): every convolution on
    int8_dot_conv, without VNNI some on the u8 x s8 loop with fix-ups, and each quantised output
    equal to the numpy reference's (onnxruntime's own u8 x s8 loop may saturate on such CPUs)."""
    rng = np.random.default_rng(12)
    graph = graph_from_model_proto(quantized_block(tmp_path, rng, reduce_range=False), "qdq.onnx")
    model = Model(graph, RuntimeOptions.resolve(threads=2))
    reference = Model(graph, RuntimeOptions.resolve(threads=1, device="reference"))
    x = rng.standard_normal((1, 3, 19, 23)).astype(np.float32)
    plan = model.plan_for({"x": x})
    convs = [s for s in plan.steps if s.node.op in ("QLinearConv", "QLinearConvAdd")]  # Add: residual fused
    assert len(convs) == 5 and all(s.kernel.name.startswith("int8_dot_conv") for s in convs)
    kernels = [Int8DotConvKernel(s.node, *inputs_of(plan, s)) for s in convs]
    assert VNNI or any(k.bytes_mode and k.fixes.units.size for k in kernels)
    names = [s.node.outputs[0] for s in convs]
    got, expected = model.run({"x": x}, outputs=names), reference.run({"x": x}, outputs=names)
    for name in names:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)
