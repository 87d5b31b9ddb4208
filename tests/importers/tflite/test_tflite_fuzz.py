"""Damaged .tflite files: loading raises ModelFormatError or yields a Graph; a graph that loads
runs or fails with edgecnn's own errors (a FlatBuffer has no checksum, so a flipped byte can
make a well-formed but different model)."""

from __future__ import annotations

import contextlib
import struct
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgecnn.errors import EdgeCNNError, ModelFormatError
from edgecnn.importers.tflite import load_tflite
from edgecnn.model import Model
from importers.tflite.tflite_writer import QuantParams, TfliteWriter

MAX_RUN_ELEMENTS = 1 << 16
"""Run only graphs whose inputs are small (a damaged shape can declare millions of pixels)."""


def fuzz_model() -> bytes:
    """Int8 and float layers, per-channel quantisation, options tables and a signature."""
    rng = np.random.default_rng(7)
    w = TfliteWriter()
    x = w.tensor("x", (1, 6, 6, 2))
    xq = w.tensor("xq", (1, 6, 6, 2), "int8", QuantParams([0.05], [3]))
    w.op("QUANTIZE", [x], [xq])
    filters = w.const(
        "w",
        rng.integers(-100, 100, (3, 3, 3, 2)).astype(np.int8),
        quant=QuantParams([0.01, 0.02, 0.03], [0, 0, 0], 0),
    )
    bias = w.const(
        "b", np.array([5, -5, 9], np.int32), quant=QuantParams([0.0005, 0.001, 0.0015], [0, 0, 0], 0)
    )
    conv = w.tensor("conv", (1, 3, 3, 3), "int8", QuantParams([0.1], [-2]))
    w.op(
        "CONV_2D",
        [xq, filters, bias],
        [conv],
        "Conv2DOptions",
        Padding=0,
        StrideH=2,
        StrideW=2,
        FusedActivationFunction=1,
    )
    real = w.tensor("real", (1, 3, 3, 3))
    w.op("DEQUANTIZE", [conv], [real])
    flat = w.tensor("flat", (1, 27))
    w.op(
        "RESHAPE",
        [real, w.const("shape", np.array([1, 27], np.int32))],
        [flat],
        "ReshapeOptions",
        NewShape=[1, 27],
    )
    logits = w.tensor("logits", (1, 4))
    w.op(
        "FULLY_CONNECTED",
        [flat, w.const("fc", rng.standard_normal((4, 27)).astype(np.float32))],
        [logits],
        "FullyConnectedOptions",
    )
    y = w.tensor("y", (1, 4))
    w.op("SOFTMAX", [logits], [y], "SoftmaxOptions", Beta=1.0)
    return w.build([x], [y], {"inputs": {"image": x}, "outputs": {"probs": y}})


VALID = fuzz_model()


def load_or_format_error(path: Path) -> None:
    try:
        graph = load_tflite(path)
    except ModelFormatError:
        return
    sizes = [np.prod([d if isinstance(d, int) else 1 for d in (s.shape or ())]) for s in graph.inputs]
    if any(size > MAX_RUN_ELEMENTS for size in sizes):
        return
    try:
        model = Model(graph)
        feeds = {
            s.name: np.ones([d if isinstance(d, int) else 1 for d in (s.shape or ())], s.dtype)
            for s in model.inputs
        }
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # flipped float bits make inf/nan
            model.run(feeds)
    except EdgeCNNError:
        pass


def test_the_valid_file_loads_and_runs(tmp_path: Path) -> None:
    path = tmp_path / "valid.tflite"
    path.write_bytes(VALID)
    model = Model(load_tflite(path))
    probs = model.run({"x": np.ones((1, 6, 6, 2), np.float32)})["y"]
    assert probs.shape == (1, 4) and abs(float(probs.sum()) - 1) < 1e-5


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(0, len(VALID) - 1))
def test_truncated(tmp_path: Path, cut: int) -> None:
    """Loads only when the cut took bytes no table points into (the builder writes data last-first)."""
    path = tmp_path / "cut.tflite"
    path.write_bytes(VALID[:cut])
    load_or_format_error(path)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flips=st.lists(st.tuples(st.integers(0, len(VALID) - 1), st.integers(1, 255)), min_size=1, max_size=4))
def test_flipped_bytes(tmp_path: Path, flips: list[tuple[int, int]]) -> None:
    data = bytearray(VALID)
    for position, mask in flips:
        data[position] ^= mask
    path = tmp_path / "flipped.tflite"
    path.write_bytes(bytes(data))
    load_or_format_error(path)


EXTREMES = (0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, len(VALID) - 4)


def test_every_word_set_to_an_extreme(tmp_path: Path) -> None:
    """Every aligned 32-bit word (offsets, vector lengths, indices) replaced by an extreme value,
    the values taken in turn (the hypothesis test below pairs them at random)."""
    for word in range(len(VALID) // 4):
        value = EXTREMES[word % len(EXTREMES)]
        data = VALID[: 4 * word] + struct.pack("<I", value) + VALID[4 * word + 4 :]
        path = tmp_path / "word.tflite"
        path.write_bytes(data)
        with contextlib.suppress(ModelFormatError):
            load_tflite(path)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(word=st.integers(0, len(VALID) // 4 - 1), value=st.sampled_from(EXTREMES))
def test_random_words_set_to_extremes(tmp_path: Path, word: int, value: int) -> None:
    path = tmp_path / "word.tflite"
    path.write_bytes(VALID[: 4 * word] + struct.pack("<I", value) + VALID[4 * word + 4 :])
    load_or_format_error(path)


def test_not_a_tflite_file(tmp_path: Path) -> None:
    path = tmp_path / "text.tflite"
    path.write_bytes(b"this is not a FlatBuffer at all")
    with pytest.raises(ModelFormatError, match="TFL3"):
        load_tflite(path)
