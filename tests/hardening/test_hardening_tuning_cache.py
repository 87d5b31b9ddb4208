"""Issue 34's tuning-cache cases: a cache of any depth, type or file kind is ignored with one
warning (it broke every run with a RecursionError, or blocked on a FIFO) and rewritten by the next
`edgecnn tune`; a failed write is an EdgeCNNError naming the cache."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import pytest

from edgecnn.errors import ConfigurationError
from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.kernels import tuning
from edgecnn.model import Model
from edgecnn.ops.conv import ConvAttrs
from edgecnn.paths import CACHE_ENV
from edgecnn.runtime.options import RuntimeOptions


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    return tmp_path / "cache" / tuning.CACHE_FILE


def conv_model() -> Model:
    """A 3x3 convolution: a layer several kernels can run, so planning consults the cache."""
    w = np.ones((2, 1, 3, 3), np.float32)
    graph = Graph(
        inputs=[TensorSpec("x", "float32", (1, 1, 5, 5))],
        outputs=["y"],
        nodes=[Node("Conv", "conv", ["x", "w"], ["y"], ConvAttrs(pads=(1, 1, 1, 1)))],
        initializers={"w": w},
        name="conv",
    )
    return Model(graph, RuntimeOptions.resolve(threads=1))


@pytest.mark.parametrize("kind", ["deep nesting", "deep object", "FIFO", "directory"])
def test_unreadable_cache_is_ignored_with_one_warning_and_rewritten(cache: Path, kind: str) -> None:
    if kind == "deep nesting":
        cache.write_text("[" * 100_000)
    elif kind == "deep object":
        cache.write_text('{"a":' * 50_000 + "1" + "}" * 50_000)
    elif kind == "FIFO":
        os.mkfifo(cache)  # a read would block for ever
    else:
        cache.mkdir()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):  # every run plans; the damaged file is read (and reported) once
            out = conv_model().run(np.ones((1, 1, 5, 5), np.float32))["y"]
            assert out[0, 0, 2, 2] == 9 and out[0, 1, 0, 0] == 4
    assert [w.category for w in caught].count(tuning.TuningCacheWarning) == 1, [
        str(w.message) for w in caught
    ]
    if kind in ("FIFO", "directory"):
        return  # not a file `edgecnn tune` may replace
    with pytest.warns(tuning.TuningCacheWarning):
        tuning.store_choices({"k": tuning.TunedChoice("im2col_gemm", {})})
    assert set(tuning.read_cache(cache)) == {tuning.machine_fingerprint()}


def test_a_failed_write_names_the_cache(cache: Path) -> None:
    cache.mkdir()  # the target is a directory
    with pytest.raises(ConfigurationError, match=r"cannot write the tuning cache .*kernel-tuning\.json"):
        tuning.write_cache(cache, {})
