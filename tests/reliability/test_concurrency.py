"""Eight threads calling one prepared CPU kernel at once get the bits one thread gets, for every
kernel of every family in kernels/cpu/selection.py; and eight threads running one Model agree with
a single run.

A kernel is prepared once per plan and shared by every concurrent run of it, so any state a kernel
keeps between calls (scratch, packed weights, numba's thread pool) must survive callers racing.
Each thread also asks for 2 numba threads, so the compiled loops run parallel inside parallel
callers. The coverage check fails when a kernel is added to selection.py without a case here.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

import edgecnn
from edgecnn.bench.zoo import build_model
from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.conv.steps import micro_kernel_over_blas
from edgecnn.kernels.cpu.selection import FAMILIES
from edgecnn.kernels.cpu.system.threads import cpu_threads
from edgecnn.kernels.registry import candidate_kernels
from edgecnn.ops.activation import AlphaAttrs, GeluAttrs, LeakyReluAttrs, SoftmaxAttrs
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.dense import GemmAttrs
from edgecnn.ops.fused import FusedConvAttrs
from edgecnn.ops.norm import LayerNormalizationAttrs, LRNAttrs
from edgecnn.ops.pool import AveragePoolAttrs, MaxPoolAttrs
from edgecnn.ops.quant import Int8ConvAttrs, Int8GemmAttrs, QLinearAddAttrs, QuantizeAttrs
from edgecnn.ops.quant_residual import QLinearConvAddAttrs
from edgecnn.ops.registry import NoAttrs
from edgecnn.ops.resize import ResizeAttrs
from edgecnn.ops.shape import ConcatAttrs, SplitAttrs, TransposeAttrs
from kernels.support import fast_run

THREADS = 8
CALLS = 3
"""Calls per thread: later calls reuse whatever the first ones left behind."""

rng = np.random.default_rng(34)


def floats(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def pruned(*shape: int, density: float = 0.02) -> np.ndarray:
    w = floats(*shape)
    w[rng.random(shape) > density] = 0
    return w


def repeated_rows(count: int, distinct: int, *rest: int) -> np.ndarray:
    """``count`` filters (rows) drawn from ``distinct`` different ones."""
    return floats(distinct, *rest)[rng.integers(0, distinct, count)]


def int8(*shape: int) -> np.ndarray:
    return rng.integers(-127, 128, shape).astype(np.int8)


def uint8(*shape: int) -> np.ndarray:
    return rng.integers(0, 256, shape).astype(np.uint8)


def scale(value: float) -> np.ndarray:
    return np.float32(value)


NEAREST = ResizeAttrs(mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
Case = tuple[Node, list[Any], tuple[int, ...]]  # node, inputs, indices of plan-time constants


def case(op: str, attrs: object, inputs: list[Any], constants: tuple[int, ...], outputs: int = 1) -> Case:
    names = ["" if x is None else f"in{i}" for i, x in enumerate(inputs)]
    return Node(op, f"{op.lower()}", names, [f"out{i}" for i in range(outputs)], attrs), inputs, constants


def int8_inputs(x: np.ndarray, w: np.ndarray, bias: np.ndarray) -> list[Any]:
    """Float input, per-channel int8 weights, int8 output (QLinear-style operands)."""
    return [x, np.float32(0.05), np.int8(0), w, np.full(w.shape[0], 0.02, np.float32),
            np.zeros(w.shape[0], np.int8), np.float32(0.1), np.int8(3), bias]  # fmt: skip


CASES: list[Case] = [
    case("Conv", ConvAttrs(pads=(1, 1)), [floats(2, 4, 37), floats(6, 4, 3)], (1,)),
    case("Conv", ConvAttrs(pads=(1, 1, 1, 1), group=8), [floats(1, 8, 13, 41), floats(8, 1, 3, 3)], (1,)),
    case(  # a small map: depthwise_lanes, two blocks of channels on most vector widths
        "FusedConv",
        FusedConvAttrs(strides=(2, 2), pads=(2, 2, 2, 2), group=21, activation="silu"),
        [floats(2, 21, 13, 13), floats(21, 1, 5, 5), floats(21)],
        (1, 2),
    ),
    case("Conv", ConvAttrs(pads=(1, 1, 1, 1)), [floats(1, 16, 11, 11), pruned(24, 16, 3, 3)], (1,)),
    case("Conv", ConvAttrs(pads=(1, 1, 1, 1)), [floats(1, 16, 11, 11), repeated_rows(24, 5, 16, 3, 3)], (1,)),
    case("Conv", ConvAttrs(), [floats(2, 16, 9, 9), floats(20, 16, 1, 1), floats(20)], (1, 2)),
    case(
        "Conv",
        ConvAttrs(pads=(1, 1, 1, 1)),
        [floats(1, 16, 14, 14), floats(20, 16, 3, 3), floats(20)],
        (1, 2),
    ),
    case(
        "Conv",
        ConvAttrs(strides=(2, 2), pads=(2, 2, 2, 2)),
        [floats(1, 6, 17, 17), floats(10, 6, 5, 5)],
        (1,),
    ),
    case(
        "FusedConv",
        FusedConvAttrs(pads=(1, 1, 1, 1), activation="relu"),
        [floats(1, 32, 6, 6), floats(40, 32, 3, 3), floats(40)],
        (1, 2),
    ),
    case(
        "FusedConvAdd",
        FusedConvAttrs(pads=(1, 1, 1, 1), activation="relu"),
        [floats(1, 8, 10, 10), floats(8, 8, 3, 3), floats(8), floats(1, 8, 10, 10)],
        (1, 2),
    ),
    case(
        "FusedConv",
        FusedConvAttrs(activation="sigmoid"),
        [floats(2, 300, 1, 1), floats(1800, 300, 1, 1), floats(1800)],  # over the grain: parallel
        (1, 2),
    ),
    case("Gemm", GemmAttrs(trans_b=True), [floats(3, 40), floats(24, 40), floats(24)], (1, 2)),
    case("Gemm", GemmAttrs(trans_b=True), [floats(3, 64), pruned(48, 64), floats(48)], (1, 2)),
    case("Gemm", GemmAttrs(trans_b=True), [floats(3, 40), repeated_rows(24, 5, 40), floats(24)], (1, 2)),
    case("LeakyRelu", AlphaAttrs(alpha=0.1), [floats(3, 100_001)], ()),
    case("Relu", NoAttrs(), [floats(2, 3, 170, 190)], ()),
    case(
        "Int8Conv",
        Int8ConvAttrs(pads=(1, 1, 1, 1)),
        int8_inputs(floats(1, 6, 9, 9), int8(10, 6, 3, 3), rng.integers(-99, 99, 10).astype(np.int32)),
        (1, 2, 3, 4, 5, 6, 7, 8),
    ),
    case(
        "Int8Conv",
        Int8ConvAttrs(strides=(2, 2), pads=(1, 1, 1, 1), group=8),
        int8_inputs(floats(1, 8, 13, 13), int8(8, 1, 3, 3), rng.integers(-99, 99, 8).astype(np.int32)),
        (1, 2, 3, 4, 5, 6, 7, 8),
    ),
    case(
        "Int8Gemm",
        Int8GemmAttrs(trans_b=True),
        int8_inputs(floats(3, 50), int8(17, 50), rng.integers(-99, 99, 17).astype(np.int32)),
        (1, 2, 3, 4, 5, 6, 7, 8),
    ),
    case(
        "QLinearConvAdd",
        QLinearConvAddAttrs(pads=(1, 1, 1, 1), relu=True, conv_first=False),
        [
            uint8(1, 8, 12, 12),
            scale(0.05),
            np.uint8(120),
            int8(16, 8, 3, 3),
            np.full(16, 0.02, np.float32),
            np.zeros(16, np.int8),
            scale(0.1),
            np.uint8(100),
            rng.integers(-99, 99, 16).astype(np.int32),
            uint8(1, 16, 12, 12),
            scale(0.07),
            np.uint8(90),
            scale(0.1),
            np.uint8(100),
            scale(0.12),
            np.uint8(80),
        ],
        (1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15),
    ),
    case("QuantizeLinear", QuantizeAttrs(), [floats(4, 333), np.float32(0.02), np.int8(-3)], (1, 2)),
    case(
        "DequantizeLinear",
        QuantizeAttrs(),
        [rng.integers(0, 256, (4, 333)).astype(np.uint8), np.float32(0.02), np.uint8(131)],
        (1, 2),
    ),
    case(
        "QLinearAdd",
        QLinearAddAttrs(activation="relu"),
        [
            uint8(2, 8, 17, 19),
            scale(0.03),
            np.uint8(120),
            uint8(2, 8, 17, 19),
            scale(0.05),
            np.uint8(7),
            scale(0.06),
            np.uint8(90),
        ],
        (1, 2, 4, 5, 6, 7),
    ),
    case(
        "QLinearConcat",
        ConcatAttrs(axis=1),
        [
            scale(0.05),
            np.uint8(100),
            uint8(2, 3, 9, 11),
            scale(0.05),
            np.uint8(100),
            uint8(2, 5, 9, 11),
            scale(0.02),
            np.uint8(3),
        ],
        (0, 1, 3, 4, 6, 7),
    ),
    case(
        "QLinearLeakyRelu",
        LeakyReluAttrs(alpha=0.1),
        [uint8(3, 40_001), scale(0.04), np.uint8(128), scale(0.03), np.uint8(20)],
        (1, 2, 3, 4),
    ),
    case(
        "MaxPool",
        MaxPoolAttrs(kernel_shape=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1)),
        [uint8(2, 8, 15, 15)],
        (),
    ),
    case(
        "QLinearAveragePool",
        AveragePoolAttrs(kernel_shape=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1)),
        [uint8(2, 8, 15, 15), scale(0.05), np.uint8(10), scale(0.04), np.uint8(5)],
        (1, 2, 3, 4),
    ),
    case(
        "QLinearGlobalAveragePool",
        NoAttrs(),
        [uint8(2, 16, 7, 9), scale(0.05), np.uint8(10), scale(0.04), np.uint8(5)],
        (1, 2, 3, 4),
    ),
    case(
        "QLinearLRN",
        LRNAttrs(size=5, alpha=1e-4, beta=0.75, bias=1.0),
        [uint8(2, 12, 9, 70), scale(0.05), np.uint8(3), scale(0.04), np.uint8(2)],
        (1, 2, 3, 4),
    ),
    case("LRN", LRNAttrs(size=5, alpha=1e-4, beta=0.75, bias=1.0), [floats(1, 12, 9, 9)], ()),
    case(
        "MaxPool",
        MaxPoolAttrs(kernel_shape=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1)),
        [floats(2, 8, 15, 15)],
        (),
    ),
    case("AveragePool", AveragePoolAttrs(kernel_shape=(3,), strides=(2,)), [floats(2, 8, 41)], ()),
    case("GlobalAveragePool", NoAttrs(), [floats(2, 16, 7, 9)], ()),
    case("GlobalMaxPool", NoAttrs(), [floats(2, 16, 7, 9)], ()),
    case("Softmax", SoftmaxAttrs(axis=-1), [floats(8, 1001)], ()),
    case("Add", NoAttrs(), [floats(2, 8, 16, 16), floats(1, 8, 1, 1)], ()),
    case("Div", NoAttrs(), [floats(2, 8, 16, 16), floats(16)], ()),
    case("Gelu", GeluAttrs(), [floats(3, 1000)], ()),
    case("LayerNormalization", LayerNormalizationAttrs(), [floats(4, 7, 64), floats(64), floats(64)], (1, 2)),
    case("MatMul", NoAttrs(), [floats(2, 5, 32), floats(32, 24)], (1,)),
    case("Resize", NEAREST, [floats(1, 3, 5, 7), None, np.array([1, 1, 2, 2], np.float32)], (2,)),
    case("Concat", ConcatAttrs(axis=1), [floats(2, 3, 5, 7), floats(2, 4, 5, 7)], ()),
    case("Split", SplitAttrs(axis=1, num_outputs=2), [floats(2, 6, 5, 5)], (), outputs=2),
    case("Transpose", TransposeAttrs(perm=(0, 2, 3, 1)), [floats(2, 19, 13, 11)], ()),
    case("Transpose", TransposeAttrs(perm=(0, 2, 1, 3, 4)), [floats(1, 2, 12, 5, 7)], ()),
]


def prepared(node: Node, inputs: list[Any], constants: tuple[int, ...]) -> list[tuple[str, Any]]:
    """(name, prepared callable) of every CPU kernel that can run ``node``."""
    types = [None if x is None else TensorType(str(np.asarray(x).dtype), np.shape(x)) for x in inputs]
    values = [x if i in constants else None for i, x in enumerate(inputs)]
    fast_run("Relu", NoAttrs(), [np.zeros(1, np.float32)], (), 1)  # the CPU runtime started, as a plan does
    return [(e.name, e.factory(node, types, values)) for e in candidate_kernels(node, types, values)]


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("index", range(len(CASES)), ids=[f"{c[0].op}-{i}" for i, c in enumerate(CASES)])
def test_concurrent_calls_of_one_kernel_match_one_thread(index: int) -> None:
    node, inputs, constants = CASES[index]
    kernels = prepared(node, inputs, constants)
    assert kernels, f"no CPU kernel runs {node.op}"
    for name, run in kernels:
        with cpu_threads(1):
            expected = np.array(np.asarray(run(*inputs)), copy=True)

        def calls(_: int, run: Any = run) -> list[np.ndarray]:
            with cpu_threads(2):
                return [np.array(np.asarray(run(*inputs)), copy=True) for _ in range(CALLS)]

        with ThreadPoolExecutor(THREADS) as pool:
            results = [out for outs in pool.map(calls, range(THREADS)) for out in outs]
        differing = sum(not same_bits(out, expected) for out in results)
        assert differing == 0, (
            f"{node.op} kernel {name}: {differing} of {len(results)} concurrent results differ"
        )


def machine_excluded() -> set[str]:
    """Kernels that this machine's rules never offer, whatever the layer (none can be covered here)."""
    return {"gemm_1x1"} if micro_kernel_over_blas() else set()


def test_every_cpu_kernel_has_a_concurrency_case() -> None:
    listed = {name for family in FAMILIES.values() for name, _ in family.kernels} - machine_excluded()
    covered = {name for node, inputs, constants in CASES for name, _ in prepared(node, inputs, constants)}
    assert listed <= covered, f"kernels without a concurrency case: {sorted(listed - covered)}"


def test_eight_threads_running_one_model_match_a_single_run(tmp_path: Path) -> None:
    """A small GoogLeNet (conv, pool, concat, dense, softmax) at batch sizes 1 to 3, all at once."""
    path = tmp_path / "googlenet.onnx"
    onnx.save(build_model("googlenet", width=0.25, resolution=64), str(path))
    model = edgecnn.load(path, threads=2)
    feeds = [floats(batch, 3, 64, 64) for batch in (1, 2, 3)]
    expected = [model(x) for x in feeds]

    def run(index: int) -> bool:
        return all(same_bits(model(feeds[(index + k) % 3]), expected[(index + k) % 3]) for k in range(CALLS))

    with ThreadPoolExecutor(THREADS) as pool:
        assert all(pool.map(run, range(THREADS)))
