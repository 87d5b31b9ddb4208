"""`compare_layers` against LiteRT on a .tflite file the test writes: NHWC tensors matched with
edgecnn's NCHW ones by name, and a planted error found at its layer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from edgecnn.compare import compare_layers

pytest.importorskip("ai_edge_litert")
from importers.tflite.tflite_writer import TfliteWriter


def tflite_model(path: Path, bump: float = 0.0) -> Path:
    """conv(relu) -> conv -> max pool -> fully connected -> logistic on a 1x8x8x3 input; ``bump`` is
    added to one weight of the second convolution."""
    rng = np.random.default_rng(11)
    w = TfliteWriter()
    x = w.tensor("x", (1, 8, 8, 3))
    c1, c2 = w.tensor("c1", (1, 8, 8, 4)), w.tensor("c2", (1, 8, 8, 6))
    pooled, logits, y = w.tensor("pooled", (1, 4, 4, 6)), w.tensor("logits", (1, 5)), w.tensor("y", (1, 5))
    filters2 = rng.standard_normal((6, 3, 3, 4)).astype(np.float32) * 0.3
    filters2[1, 1, 1, 2] += bump
    conv = {"Padding": 0, "StrideH": 1, "StrideW": 1}
    w.op(
        "CONV_2D",
        [
            x,
            w.const("f1", rng.standard_normal((4, 3, 3, 3)).astype(np.float32)),
            w.const("b1", np.zeros(4, np.float32)),
        ],
        [c1],
        "Conv2DOptions",
        FusedActivationFunction=1,
        **conv,
    )
    w.op(
        "CONV_2D",
        [c1, w.const("f2", filters2), w.const("b2", np.zeros(6, np.float32))],
        [c2],
        "Conv2DOptions",
        **conv,
    )
    pool = {"Padding": 1, "StrideH": 2, "StrideW": 2, "FilterHeight": 2, "FilterWidth": 2}
    w.op("MAX_POOL_2D", [c2], [pooled], "Pool2DOptions", **pool)
    dense = w.const("fc", rng.standard_normal((5, 96)).astype(np.float32) * 0.1)
    w.op(
        "FULLY_CONNECTED",
        [pooled, dense, w.const("fc_bias", np.zeros(5, np.float32))],
        [logits],
        "FullyConnectedOptions",
    )
    w.op("LOGISTIC", [logits], [y])
    path.write_bytes(w.build([x], [y]))
    return path


def test_tflite_model_agrees_with_litert(tmp_path: Path) -> None:
    model = tflite_model(tmp_path / "m.tflite")
    result = compare_layers(model, "tflite", optimize=False, threads=1)
    assert [row.tensor for row in result.layers] == ["c1", "c2", "pooled", "logits", "y"]
    assert result.first_over is None
    assert all(row.diff is not None and row.diff.cosine > 0.9999 for row in result.layers)


def test_planted_error_against_litert(tmp_path: Path) -> None:
    model = tflite_model(tmp_path / "m.tflite")
    planted = tflite_model(tmp_path / "planted.tflite", bump=0.5)
    result = compare_layers(model, "tflite", peer_model=planted, optimize=False, threads=1)
    assert result.first_over is not None and result.first_over.tensor == "c2"
    assert result.layers[0].status == "ok"


def test_int8_model_within_one_step(tmp_path: Path) -> None:
    """A fully int8 convolution: its stored int8 tensors are compared as integers, one step of
    difference being rounding (edgecnn requantises in float, TFLite in fixed point)."""
    from importers.tflite.test_int8_ops import CASES, build_int8

    data, feeds, int8_name, _, _ = build_int8(CASES["conv_relu_per_channel"])
    model = tmp_path / "int8.tflite"
    model.write_bytes(data)
    result = compare_layers(model, "tflite", feeds=feeds, optimize=False, threads=1)
    rows = {row.tensor: row for row in result.layers}
    assert {"x_int8", int8_name, "y_float"} <= set(rows)
    assert rows[int8_name].diff is not None and rows[int8_name].diff.max_abs <= 1
    assert result.first_over is None
