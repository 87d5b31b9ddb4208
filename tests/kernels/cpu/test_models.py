"""Whole models: the fast CPU kernels give the reference kernels' outputs."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import numpy as np

import edgecnn
from edgecnn.kernels.cpu import cpu_threads
from edgecnn.kernels.cpu.conv import steps as conv_kernels
from edgecnn.model import Model
from edgecnn.runtime.options import RuntimeOptions
from edgecnn.testing import assert_matches


def test_bundled_face_classifier_matches_reference() -> None:
    path = resources.files("edgecnn") / "data" / "simplecnn" / "face_binary_cls.onnx"
    fast = edgecnn.load(str(path), threads=2)
    reference = Model(fast.graph, RuntimeOptions.resolve(device="reference"))
    x = np.random.default_rng(0).standard_normal((1, 3, 128, 128), dtype=np.float32)
    kernels = {step.kernel.name for step in fast.plan_for(x).steps}
    by_the_cpu = {"im2col_gemm", "packed_gemm", "pixel_rows", "direct_rows"}
    assert {"pool_2d", "gemm"} <= kernels and kernels & by_the_cpu
    expected = reference(x)
    for threads in (1, 2):
        with cpu_threads(threads):
            actual = fast(x)
        assert_matches(actual, expected, np.abs(expected).max())


def test_alexnet_with_groups_and_caffe_pooling_matches_reference() -> None:
    from edgecnn.importers.caffe import load_caffe

    fixture = Path(__file__).parents[2] / "fixtures" / "caffe" / "bvlc_alexnet.deploy.prototxt"
    graph = load_caffe(str(fixture), random_seed=0)
    fast = Model(graph, RuntimeOptions.resolve(threads=2))
    reference = Model(graph, RuntimeOptions.resolve(device="reference"))
    x = np.random.default_rng(1).standard_normal((1, 3, 227, 227), dtype=np.float32)
    kernels = [step.kernel.name for step in fast.plan_for(x).steps]
    convolutions = [
        k
        for k in kernels
        if k in ("im2col_gemm", "packed_gemm", "direct_gemm", "direct_rows") or k.startswith("winograd")
    ]
    # the 11x11/4 stem: shallow filters, no im2col (with AVX-512, 96 channels in panels of 32)
    assert kernels[0] == ("direct_rows" if conv_kernels.micro_kernel_over_blas() else "direct_gemm")
    assert len(convolutions) == 5 and kernels.count("pool_2d") == 3  # 3x3 layers may go to Winograd
    expected = reference(x)
    with cpu_threads(2):
        actual = fast(x)
    assert_matches(actual, expected)
