"""The kernel tuning cache (edgecnn.kernels.tuning) and candidate timing (tuning_measure): where the
file lives, round trips, other machines' sections kept, damaged files ignored with a warning,
select_kernel following a cached choice only where it applies."""

from __future__ import annotations

import importlib
import json
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels import tuning
from edgecnn.kernels.registry import candidate_kernels, scoped_registrations, select_kernel
from edgecnn.kernels.tuning_measure import (
    LayerTiming,
    example_inputs,
    time_layer,
    time_layers,
    tunable_layers,
)
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.fused import FusedConvAttrs, residual_conv_node
from edgecnn.ops.pool import MaxPoolAttrs
from edgecnn.paths import CACHE_ENV
from kernels.support import Retune


@pytest.fixture(autouse=True, scope="module")
def registered_winograd() -> Iterator[None]:
    """The Winograd kernels registered for this module's tests by a fresh import, whether or not
    kernels/cpu/__init__.py imports them, and the registry restored afterwards."""
    importlib.import_module("edgecnn.kernels.cpu")  # the backend's own kernels: registered for good
    with scoped_registrations():
        sys.modules.pop("edgecnn.kernels.cpu.conv.winograd", None)
        importlib.import_module("edgecnn.kernels.cpu.conv.winograd")
        yield


@pytest.fixture(autouse=True)
def blas_tiles_rule(retune: Retune) -> None:
    """The heuristic as on AVX2, where small_conv goes to the BLAS tiles (im2col_gemm): these tests
    follow the cache against that default (on AVX-512 the rule gives the layer to packed_gemm)."""

    retune(micro_kernel_over_blas=False)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache" / tuning.CACHE_FILE


def small_conv(
    c: int = 4, m: int = 6, size: int = 9, **attrs: Any
) -> tuple[Node, list[TensorType], list[Any]]:
    """A 3x3 conv the heuristics give to im2col_gemm (too few channels for Winograd)."""
    w = np.random.default_rng(0).standard_normal((m, c, 3, 3)).astype(np.float32)
    node = Node("Conv", "conv1", ["x", "w"], ["y"], ConvAttrs(pads=(1, 1, 1, 1), **attrs))
    return node, [TensorType("float32", (1, c, size, size)), TensorType("float32", w.shape)], [None, w]


def test_cache_file_is_in_the_cache_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "x"))
    assert tuning.cache_path() == tmp_path / "x" / "kernel-tuning.json"


def test_key_depends_on_shapes_attrs_and_threads() -> None:
    node, types, values = small_conv()
    key = tuning.layer_key(node, types, values, "cpu", 2)
    renamed = Node("Conv", "other_name", ["a", "b"], ["c"], node.attrs)
    assert tuning.layer_key(renamed, types, values, "cpu", 2) == key  # names do not matter
    assert tuning.layer_key(node, types, values, "cpu", 1) != key
    assert tuning.layer_key(node, [TensorType("float32", (2, 4, 9, 9)), types[1]], values, "cpu", 2) != key
    strided = Node("Conv", "conv1", ["x", "w"], ["y"], ConvAttrs(pads=(1, 1, 1, 1), strides=(2, 2)))
    assert tuning.layer_key(strided, types, values, "cpu", 2) != key


def test_key_tells_pruned_weights_from_dense_ones() -> None:
    node, types, values = small_conv()
    weights = values[1]
    assert weights is not None
    pruned = weights.copy()
    pruned.reshape(-1)[: pruned.size * 9 // 10] = 0  # 10% kept
    key = tuning.layer_key(node, types, values, "cpu", 1)
    assert tuning.layer_key(node, types, [values[0], pruned, *values[2:]], "cpu", 1) != key
    nudged = weights + np.float32(1e-3)  # same density, other values: the same key
    assert tuning.layer_key(node, types, [values[0], nudged, *values[2:]], "cpu", 1) == key


def test_round_trip_keeps_other_machines(cache: Path) -> None:
    cache.parent.mkdir(parents=True)
    other = {
        "format": tuning.FORMAT,
        "machines": {"elsewhere": {"entries": {"k": {"kernel": "a", "times_ms": {}}}}},
    }
    cache.write_text(json.dumps(other))
    choice = tuning.TunedChoice("winograd_f23", {"winograd_f23": 1.0, "im2col_gemm": 2.0})
    tuning.store_choices({"key1": choice})
    assert tuning.this_machine_choices() == {"key1": choice}
    machines = tuning.read_cache(cache)
    assert machines["elsewhere"]["k"].kernel == "a"
    assert set(machines) == {"elsewhere", tuning.machine_fingerprint()}
    tuning.store_choices({"key2": choice})  # merged, not replaced
    assert set(tuning.this_machine_choices()) == {"key1", "key2"}


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"\xff\xfe\x00binary",
        b"[]",
        b'{"format": "something-else", "machines": {}}',
        b'{"format": "edgecnn-kernel-tuning/1", "machines": []}',
        b'{"format": "edgecnn-kernel-tuning/1", "machines": {"m": {"entries": {"k": {"times_ms": {}}}}}}',
        b'{"format": "edgecnn-kernel-tuning/1", "machines": {"m": {"entries": {"k": {"kernel": "a", "times_ms": {"a": "x"}}}}}}',
        b'{"format": "edgecnn-kernel-tuning/1", "machines": {"m": 3}}',
    ],
)
def test_damaged_cache_is_ignored_with_a_warning(cache: Path, content: bytes) -> None:
    cache.parent.mkdir(parents=True)
    cache.write_bytes(content)
    with pytest.warns(tuning.TuningCacheWarning, match="kernel-tuning.json"):
        assert tuning.read_cache(cache) == {}
    node, types, values = small_conv()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tuning.TuningCacheWarning)
        assert select_kernel(node, types, values, threads=1).name == "im2col_gemm"
    with pytest.warns(tuning.TuningCacheWarning):
        tuning.store_choices({"k": tuning.TunedChoice("im2col_gemm", {})})  # a damaged file is rebuilt
    assert set(tuning.read_cache(cache)) == {tuning.machine_fingerprint()}


def test_select_kernel_follows_the_cache(cache: Path) -> None:
    node, types, values = small_conv()
    assert select_kernel(node, types, values, threads=1).name == "im2col_gemm"
    key = tuning.layer_key(node, types, values, "cpu", 1)
    tuning.store_choices({key: tuning.TunedChoice("winograd_f23", {})})
    assert select_kernel(node, types, values, threads=1).name == "winograd_f23"
    assert select_kernel(node, types, values, threads=2).name == "im2col_gemm"  # another thread count
    assert select_kernel(node, types, values, backend="reference", threads=1).name == "reference"


def test_cached_kernel_that_cannot_run_the_layer_is_ignored(cache: Path) -> None:
    node, types, values = small_conv()
    tuning.store_choices(
        {
            tuning.layer_key(node, types, values, "cpu", 1): tuning.TunedChoice("depthwise", {})
        }  # not a depthwise layer
    )
    assert select_kernel(node, types, values, threads=1).name == "im2col_gemm"
    tuning.store_choices(
        {tuning.layer_key(node, types, values, "cpu", 1): tuning.TunedChoice("no_such_kernel", {})}
    )
    assert select_kernel(node, types, values, threads=1).name == "im2col_gemm"


def test_without_threads_the_cache_is_not_consulted(cache: Path) -> None:
    node, types, values = small_conv()
    tuning.store_choices(
        {tuning.layer_key(node, types, values, "cpu", 3): tuning.TunedChoice("winograd_f43", {})}
    )
    assert select_kernel(node, types, values).name == "im2col_gemm"
    assert select_kernel(node, types, values, threads=3).name == "winograd_f43"


def test_an_inner_selection_uses_the_threads_of_the_outer_one(cache: Path) -> None:
    from edgecnn.kernels.registry import register_kernel
    from edgecnn.ops.registry import NoAttrs

    node, types, values = small_conv()
    tuning.store_choices(
        {tuning.layer_key(node, types, values, "cpu", 3): tuning.TunedChoice("winograd_f43", {})}
    )
    inner: list[str] = []

    def probe(*_: Any) -> Any:
        inner.append(select_kernel(node, types, values).name)
        return lambda x: x

    relu = Node("Relu", "act", ["x"], ["y"], NoAttrs())
    with scoped_registrations():
        register_kernel("Relu", priority=10**6, name="probe")(probe)
        select_kernel(relu, [TensorType("float32", (4,))], [None], threads=3)
    assert inner == ["winograd_f43"]


def test_candidates_are_every_kernel_that_can_run_the_layer() -> None:
    node, types, values = small_conv()
    assert [e.name for e in candidate_kernels(node, types, values)] == [
        "direct_rows",
        "winograd_f43",
        "winograd_f23",
        "pixel_rows",
        "direct_gemm",
        "packed_gemm",
        "im2col_gemm",
    ]
    strided, types2, values2 = small_conv(strides=(2, 2))
    assert [e.name for e in candidate_kernels(strided, types2, values2)] == [
        "direct_rows",
        "pixel_rows",
        "direct_gemm",
        "packed_gemm",
        "im2col_gemm",
    ]


def test_time_layer_measures_every_candidate(cache: Path) -> None:
    node, types, values = small_conv()
    timings = time_layers([(node, types, values)], threads=1)
    (timing,) = timings
    assert set(timing.times_ms) == {
        "pixel_rows",
        "direct_rows",
        "packed_gemm",
        "winograd_f43",
        "winograd_f23",
        "direct_gemm",
        "im2col_gemm",
    }
    assert all(t > 0 for t in timing.times_ms.values())
    assert timing.default == "im2col_gemm"
    assert timing.times_ms[timing.winner] == min(timing.times_ms.values())
    assert timing.key == tuning.layer_key(node, types, values, "cpu", 1)
    assert timing.speedup >= 1.0


def test_residual_conv_is_tuned_as_its_convolution(cache: Path) -> None:
    """A FusedConvAdd runs the kernel chosen for its convolution, so that is what tune times and keys."""
    _, types, values = small_conv()
    node = Node("FusedConvAdd", "conv1", ["x", "w", "", "z"], ["y"], FusedConvAttrs(pads=(1, 1, 1, 1)))
    z_type = TensorType("float32", (1, 6, 9, 9))
    steps = [(node, [*types, None, z_type], [*values, None, None])]
    assert tunable_layers(steps) == [0]
    (timing,) = time_layers(steps, threads=1)
    inner = residual_conv_node(node)
    assert timing.key == tuning.layer_key(inner, types, values, "cpu", 1)
    assert set(timing.times_ms) == {
        "pixel_rows",
        "direct_rows",
        "packed_gemm",
        "winograd_f43",
        "winograd_f23",
        "direct_gemm",
        "im2col_gemm",
    }


def test_layers_with_one_candidate_are_skipped() -> None:
    node = Node("MaxPool", "pool", ["x"], ["y"], MaxPoolAttrs(kernel_shape=(2, 2), strides=(2, 2)))
    types = [TensorType("float32", (1, 3, 8, 8))]
    assert len(candidate_kernels(node, types, [None])) == 1
    assert time_layer(node, types, [None], threads=1) is None
    seen: list[Any] = []
    assert time_layers([(node, types, [None])], threads=1, on_layer=seen.append) == []
    assert seen == [None]


def test_layer_timing_winner_and_speedup() -> None:
    timing = LayerTiming("l", "Conv", "k", {"a": 4.0, "b": 1.0, "c": 2.0}, default="c")
    assert timing.winner == "b" and timing.speedup == 2.0
    assert timing.choice() == tuning.TunedChoice("b", {"a": 4.0, "b": 1.0, "c": 2.0})


def test_example_inputs_keep_constants_and_fill_the_rest() -> None:
    w = np.ones((2, 2), np.float32)
    types = [TensorType("float32", (2, 3)), TensorType("float32", (2, 2)), TensorType("int64", (4,)), None]
    x, same, ints, omitted = example_inputs(types, [None, w, None, None])
    assert x.shape == (2, 3) and x.dtype == np.float32 and same is w
    assert ints.dtype == np.int64 and not ints.any() and omitted is None


def test_registering_the_same_factory_again_replaces_it() -> None:
    """A module imported anew (as these tests do) replaces its kernels instead of listing them twice;
    scoped_registrations undoes registrations made inside it."""
    from edgecnn.kernels.registry import register_kernel

    def probe(node: Node, types: Any, values: Any) -> Any:
        return None

    def names() -> list[str]:
        node, types, values = small_conv()
        return [e.name for e in candidate_kernels(node, types, values)]

    before = names()
    with scoped_registrations():
        register_kernel("Conv", priority=99, name="probe")(probe)
        register_kernel("Conv", priority=99, name="probe")(probe)
        assert names() == ["probe", *before]
    assert names() == before
