"""Sparse CSR kernels (sparse_gemm, sparse_conv) against the numpy reference: random shapes and
densities 0..1 (all-zero weights and empty rows included), batch 1 (SpMV) and > 1 (SpMM), groups,
1x1 and strided convs, fused activations, 1 and 2 threads; and the crossover that picks them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import edgecnn.kernels.cpu.sparse.steps  # noqa: F401  (registers the sparse kernels)
from edgecnn.kernels.cpu.sparse import csr as sparse_csr
from edgecnn.kernels.cpu.system import threads as thread_budget
from edgecnn.kernels.cpu.tuning_record import DEFAULT_CPU_TUNING
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.dense import GemmAttrs
from edgecnn.ops.fused import ACTIVATIONS, FusedConvAttrs, FusedGemmAttrs
from edgecnn.testing import assert_matches, reference_run
from kernels.support import fast_run, tuned

SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@contextmanager
def always_sparse() -> Iterator[None]:
    """Every crossover above 1, so the sparse kernels run at any density."""
    with (
        tuned(spmv_crossover=1.5),
        tuned(spmm_crossover=1.5),
        tuned(conv_crossover=1.5),
    ):
        yield


def sparse_weights(rng: np.random.Generator, shape: tuple[int, ...], density: float) -> np.ndarray:
    """Standard-normal weights with each element kept with probability ``density``; a few whole
    rows zeroed so that empty CSR rows occur."""
    w = rng.standard_normal(shape, dtype=np.float32)
    w *= rng.random(shape) < density
    if shape[0] > 2:
        w[rng.integers(0, shape[0])] = 0.0
    return w


@st.composite
def activation_fields(draw: st.DrawFn) -> dict[str, Any]:
    low = draw(st.floats(-2.0, 0.5))
    return {
        "activation": draw(st.sampled_from(ACTIVATIONS)),
        "negative_slope": draw(st.floats(0.0, 0.5)),
        "low": low,
        "high": low + 1.5,
    }


@st.composite
def gemm_cases(draw: st.DrawFn) -> dict[str, Any]:
    m = draw(st.sampled_from([1, 1, 2, 3, 4, 5, 7, 9]))  # batch 1 is SpMV, the rest SpMM (blocks of 4)
    k, n = draw(st.integers(1, 70)), draw(st.integers(1, 40))
    trans_a, trans_b = draw(st.booleans()), draw(st.booleans())
    gemm = {
        "alpha": draw(st.sampled_from([1.0, 0.5, -2.0])),
        "beta": draw(st.sampled_from([1.0, 0.0, 3.0])),
        "trans_a": trans_a,
        "trans_b": trans_b,
    }
    fused = draw(st.booleans())
    op, attrs = (
        ("FusedGemm", FusedGemmAttrs(**gemm, **draw(activation_fields())))
        if fused
        else ("Gemm", GemmAttrs(**gemm))
    )
    return {
        "op": op,
        "attrs": attrs,
        "a_shape": (k, m) if trans_a else (m, k),
        "b_shape": (n, k) if trans_b else (k, n),
        "c_shape": draw(st.sampled_from([None, (n,), (1, n), (m, n), (m, 1), ()])),
        "density": draw(st.sampled_from([0.0, 0.01, 0.1, 0.3, 0.7, 1.0])),
        "seed": draw(st.integers(0, 2**16)),
    }


def check_gemm(case: dict[str, Any], threads: int) -> None:
    rng = np.random.default_rng(case["seed"])
    a = rng.standard_normal(case["a_shape"], dtype=np.float32)
    weights = sparse_weights(rng, case["b_shape"], case["density"])
    inputs = [a, weights]
    if case["c_shape"] is not None:
        inputs.append(rng.standard_normal(case["c_shape"], dtype=np.float32))
    constants = tuple(range(1, len(inputs)))
    with always_sparse():
        actual, kernel = fast_run(case["op"], case["attrs"], inputs, constants, threads)
    assert kernel == "sparse_gemm"
    magnitude = abs(case["attrs"].alpha) * np.abs(a).max() * max(np.abs(weights).max(), 1) * a.shape[1]
    assert_matches(actual, reference_run(case["op"], case["attrs"], inputs, constants), magnitude + 3)


@SETTINGS
@given(gemm_cases(), st.sampled_from([1, 2]))
def test_sparse_gemm_matches_reference(case: dict[str, Any], threads: int) -> None:
    check_gemm(case, threads)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gemm_cases())
def test_sparse_gemm_splits_rows_over_two_threads(case: dict[str, Any]) -> None:
    with tuned(grain=0):
        check_gemm(case, 2)


@st.composite
def conv_cases(draw: st.DrawFn) -> dict[str, Any]:
    group = draw(st.sampled_from([1, 1, 2, 3]))
    in_channels = group * draw(st.integers(1 if group == 1 else 2, 5))  # group == C_in is depthwise's
    out_channels = group * draw(st.integers(1, 6))
    if draw(st.integers(0, 3)) == 0:  # 1x1, unit stride, no padding: the input is the column matrix
        kernel, strides, dilations, pads = (1, 1), (1, 1), (1, 1), (0, 0, 0, 0)
    else:
        kernel = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
        strides = (draw(st.integers(1, 3)), draw(st.integers(1, 2)))
        dilations = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
        pads = tuple(draw(st.integers(0, 2)) for _ in range(4))
    spans = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    height = draw(st.integers(max(1, spans[0] - pads[0] - pads[2]), 13))
    width = draw(st.integers(max(1, spans[1] - pads[1] - pads[3]), 13))
    geometry = {
        "kernel_shape": kernel,
        "strides": strides,
        "dilations": dilations,
        "pads": pads,
        "group": group,
    }
    fused = draw(st.booleans())
    op, attrs = (
        ("FusedConv", FusedConvAttrs(**geometry, **draw(activation_fields())))
        if fused
        else ("Conv", ConvAttrs(**geometry))
    )
    return {
        "op": op,
        "attrs": attrs,
        "x_shape": (draw(st.integers(1, 3)), in_channels, height, width),
        "w_shape": (out_channels, in_channels // group, *kernel),
        "bias": draw(st.booleans()),
        "density": draw(st.sampled_from([0.0, 0.05, 0.2, 0.5, 1.0])),
        "seed": draw(st.integers(0, 2**16)),
    }


def check_conv(case: dict[str, Any], threads: int) -> None:
    rng = np.random.default_rng(case["seed"])
    x = rng.standard_normal(case["x_shape"], dtype=np.float32)
    weights = sparse_weights(rng, case["w_shape"], case["density"])
    inputs = [x, weights]
    if case["bias"]:
        inputs.append(rng.standard_normal(case["w_shape"][0], dtype=np.float32))
    constants = tuple(range(1, len(inputs)))
    with always_sparse():
        actual, kernel = fast_run(case["op"], case["attrs"], inputs, constants, threads)
    assert kernel == "sparse_conv"
    magnitude = np.abs(x).max() * max(np.abs(weights).max(), 1) * np.prod(case["w_shape"][1:])
    assert_matches(actual, reference_run(case["op"], case["attrs"], inputs, constants), magnitude + 3)


@SETTINGS
@given(conv_cases(), st.sampled_from([1, 2]))
def test_sparse_conv_matches_reference(case: dict[str, Any], threads: int) -> None:
    check_conv(case, threads)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conv_cases())
def test_sparse_conv_tiles_over_two_threads(case: dict[str, Any]) -> None:
    with (
        tuned(grain=0),
        mock.patch("edgecnn.kernels.cpu.sparse.steps.COLUMNS_BYTES", 64),
        tuned(sparse_min_width=3),
    ):
        check_conv(case, 2)


def test_crossover_picks_sparse_below_and_dense_above() -> None:
    """With the measured constants, a weight just below its crossover runs sparse and one above runs
    dense; the choice depends on the batch for Gemm."""
    rng = np.random.default_rng(0)
    k, n = 200, 50
    for rows, crossover in ((1, DEFAULT_CPU_TUNING.spmv_crossover), (4, DEFAULT_CPU_TUNING.spmm_crossover)):
        a = rng.standard_normal((rows, k), dtype=np.float32)
        for density, expected in (
            (crossover * 0.5, "sparse_gemm"),
            (min(1.0, crossover * 1.5 + 0.05), "gemm"),
        ):
            w = np.zeros((k, n), np.float32).reshape(-1)
            w[rng.permutation(w.size)[: int(density * w.size)]] = 1.0
            _, kernel = fast_run("Gemm", GemmAttrs(), [a, w.reshape(k, n)], (1,), 1)
            assert kernel == expected, (rows, density)
    x = rng.standard_normal((1, 8, 9, 9), dtype=np.float32)
    for density in (
        DEFAULT_CPU_TUNING.conv_crossover * 0.5,
        min(1.0, DEFAULT_CPU_TUNING.conv_crossover * 1.5 + 0.05),
    ):
        w = np.zeros(16 * 8 * 9, np.float32)
        w[rng.permutation(w.size)[: int(density * w.size)]] = 1.0
        _, kernel = fast_run("Conv", ConvAttrs(kernel_shape=(3, 3)), [x, w.reshape(16, 8, 3, 3)], (1,), 1)
        assert (kernel == "sparse_conv") == (density < DEFAULT_CPU_TUNING.conv_crossover), (density, kernel)


def test_depthwise_conv_stays_dense() -> None:
    x = np.ones((1, 4, 6, 6), np.float32)
    w = np.zeros((4, 1, 3, 3), np.float32)
    with always_sparse():
        _, kernel = fast_run("Conv", ConvAttrs(kernel_shape=(3, 3), group=4), [x, w], (1,), 1)
    assert kernel == "depthwise_lanes"  # a small map: channels in the vector lanes


@given(
    st.integers(0, 30),
    st.integers(1, 70_000),
    st.floats(0.0, 1.0),
    st.integers(1, 5),
    st.integers(0, 2**16),
)
@settings(max_examples=40, deadline=None)
def test_csr_round_trip_and_row_bounds(rows: int, cols: int, density: float, parts: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    cols = min(cols, 70_000 // max(rows, 1)) or 1
    matrix = sparse_weights(rng, (rows, cols), density) if rows else np.zeros((0, cols), np.float32)
    csr = sparse_csr.csr_from_dense(matrix)
    assert csr.indices.dtype == (np.uint16 if cols <= 65536 else np.int32)
    assert csr.indptr.dtype == np.int32 and csr.values.dtype == np.float32
    np.testing.assert_array_equal(csr.to_dense(), matrix)
    bounds = sparse_csr.row_bounds(csr.indptr, parts)
    assert bounds[0] == 0 and bounds[-1] == rows and (np.diff(bounds) >= 0).all()
    assert len(bounds) == (max(1, min(parts, rows)) if rows else 1) + 1


def test_index_dtype_limits() -> None:
    assert sparse_csr.index_dtype(65536) == np.uint16
    assert sparse_csr.index_dtype(65537) == np.int32
    with pytest.raises(ValueError, match="int32"):
        sparse_csr.index_dtype(2**31 + 1)


def test_small_sparse_layers_stay_on_one_thread() -> None:
    """Below the grain the kernel is called on one numba thread, whatever the budget."""
    seen: list[bool] = []
    real_call = thread_budget.call

    def spy(kernel: Any, small: bool, *args: Any) -> Any:
        seen.append(small)
        return real_call(kernel, small, *args)

    with always_sparse(), mock.patch("edgecnn.kernels.cpu.sparse.steps.call", spy):
        fast_run("Gemm", GemmAttrs(), [np.ones((1, 8), np.float32), np.eye(8, dtype=np.float32)], (1,), 2)
    assert seen == [True]


@pytest.mark.parametrize("rows", [1, 6])
def test_run_into_writes_every_output(rows: int) -> None:
    """run_into (the arena protocol) fills a buffer of garbage completely, like __call__."""
    from edgecnn.ir.graph import Node, TensorType
    from edgecnn.kernels.cpu.sparse.steps import SparseConv, SparseGemm

    rng = np.random.default_rng(rows)
    w = sparse_weights(rng, (30, 20), 0.2)
    node = Node("Gemm", "g", ["a", "w"], ["y"], GemmAttrs())
    gemm = SparseGemm(node, [TensorType("float32", (rows, 30)), TensorType("float32", (30, 20))], [None, w])
    a = rng.standard_normal((rows, 30), dtype=np.float32)
    out = np.full((rows, 20), np.nan, np.float32)
    gemm.run_into(out, a)
    np.testing.assert_allclose(out, a @ w, rtol=1e-5, atol=1e-5)

    x = rng.standard_normal((rows, 3, 7, 7), dtype=np.float32)
    wc = sparse_weights(rng, (5, 3, 3, 3), 0.3)
    conv_node = Node("Conv", "c", ["x", "w"], ["y"], ConvAttrs(kernel_shape=(3, 3)))
    types = [TensorType("float32", x.shape), TensorType("float32", wc.shape)]
    conv = SparseConv(conv_node, types, [None, wc])
    out = np.full(conv.out_shape, np.nan, np.float32)
    conv.run_into(out, x)
    np.testing.assert_allclose(out, conv(x), rtol=0, atol=0)
    assert np.isfinite(out).all()


def test_a_pruned_model_runs_sparse_and_matches_the_reference() -> None:
    """The bundled face classifier pruned to 5%: the plan picks the sparse kernels for its convs and
    its Gemm by the measured crossovers, and the outputs match the reference device's."""
    from importlib import resources

    from edgecnn.compress import compress
    from edgecnn.importers import load_graph
    from edgecnn.model import Model
    from edgecnn.runtime.options import RuntimeOptions

    path = resources.files("edgecnn") / "data" / "simplecnn" / "face_binary_cls.onnx"
    pruned, _ = compress(load_graph(str(path)), prune=0.05)
    x = np.random.default_rng(0).standard_normal((1, 3, 128, 128), dtype=np.float32)
    model = Model(pruned, RuntimeOptions.resolve(threads=2, device="cpu"))
    kernels = {step.kernel.name for step in model.plan_for({"input": x}).steps}
    assert {"sparse_gemm", "sparse_conv"} <= kernels
    reference = Model(pruned, RuntimeOptions.resolve(device="reference"))
    actual, expected = model.run({"input": x}), reference.run({"input": x})
    for name, value in expected.items():
        np.testing.assert_allclose(actual[name], value, rtol=1e-4, atol=1e-4 * np.abs(value).max())


@SETTINGS
@given(
    size=st.integers(0, 300),
    kept=st.floats(0.0, 1.0),
    fraction=st.sampled_from([0.0, 0.05, 0.1, 0.15, 0.25, 0.5, 1.0, 2.0]),
    chunk=st.integers(1, 64),
    nans=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_sparser_than_is_density_below(
    size: int, kept: float, fraction: float, chunk: int, nans: bool, seed: int
) -> None:
    """The early-stopping count answers exactly what the full count would, whatever the chunk size
    (NaN counts as non-zero, an empty weight is never sparse)."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(size).astype(np.float32) * (rng.random(size) < kept)
    if nans and size:
        w[rng.integers(0, size)] = np.nan
    with mock.patch.object(sparse_csr, "SCAN_CHUNK", chunk):
        assert sparse_csr.sparser_than(w.reshape(-1, 1), fraction) == (
            size > 0 and sparse_csr.density(w) < fraction
        )
