"""Caffe files the fuzzer (lab/fuzz) found mishandled: each is now a ModelFormatError or a graph."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import edgecnn
from edgecnn.errors import ModelFormatError
from edgecnn.importers.caffe import CaffeFormatWarning, load_caffe

HEAD = 'name: "n"\ninput: "data"\ninput_shape { dim: 1 dim: 3 dim: 4 dim: 4 }\n'


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "net.prototxt"
    path.write_text(text)
    return path


def test_layer_without_a_top(tmp_path: Path) -> None:
    """The node had no output and a graph pass indexed it (IndexError)."""
    prototxt = write(
        tmp_path,
        HEAD
        + 'layer { name: "ip" type: "InnerProduct" bottom: "data" inner_product_param { num_output: 5 } }',
    )
    with pytest.raises(ModelFormatError, match="layer 'ip' \\(InnerProduct\\): has no top"):
        load_caffe(prototxt, random_seed=0)


def test_long_unsupported_layer_types_are_elided(tmp_path: Path) -> None:
    prototxt = write(
        tmp_path, HEAD + 'layer { name: "x" type: "' + "a" * 5000 + '" bottom: "data" top: "x" }'
    )
    with pytest.raises(ModelFormatError, match=r"a{60}\.\.\. \(5000 characters\)") as caught:
        load_caffe(prototxt, random_seed=0)
    assert len(str(caught.value)) < 500


def test_in_place_layer_named_like_a_later_blob(tmp_path: Path) -> None:
    """A ReLU named "b" working in place on "a", then a layer whose top is "b": renaming the blobs'
    final versions met a tensor it had renamed already (KeyError)."""
    layers = (
        'layer { name: "s" type: "Sigmoid" bottom: "data" top: "a" }\n'
        'layer { name: "b" type: "ReLU" bottom: "a" top: "a" }\n'
        'layer { name: "t" type: "TanH" bottom: "a" top: "b" }\n'
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CaffeFormatWarning)
        model = edgecnn.Model(load_caffe(write(tmp_path, HEAD + layers), random_seed=0))
    x = np.linspace(-2, 2, 48, dtype=np.float32).reshape(1, 3, 4, 4)
    out = model.run({"data": x}, outputs=["a", "b"])
    expected_a = np.maximum(1 / (1 + np.exp(-x)), 0)
    np.testing.assert_allclose(out["a"], expected_a, rtol=1e-6)
    np.testing.assert_allclose(out["b"], np.tanh(expected_a), rtol=1e-6)


def test_input_of_a_thousand_dimensions(tmp_path: Path) -> None:
    """7^1000 elements: the size was too large for a float in the budget's message (OverflowError)."""
    prototxt = write(tmp_path, 'input: "data"\ninput_shape { ' + "dim: 7 " * 1000 + "}\n")
    with pytest.raises(ModelFormatError, match="input 'data' has an invalid shape"):
        load_caffe(prototxt, random_seed=0)


def test_an_input_with_an_empty_name(tmp_path: Path) -> None:
    """An unused input named "" loaded, and planning raised KeyError '' (the ONNX fuzz finding)."""
    prototxt = write(tmp_path, HEAD + 'input: ""\ninput_shape { dim: 1 dim: 1 dim: 2 dim: 2 }\n')
    with pytest.raises(ModelFormatError, match="input 1 has an empty name"):
        load_caffe(prototxt, random_seed=0)
