"""Bad Caffe files: each gets one ModelFormatError (or UnsupportedOperatorError) saying what and where."""

from __future__ import annotations

import contextlib
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import edgecnn
from edgecnn.errors import ModelFormatError, UnsupportedOperatorError
from edgecnn.importers.caffe import CaffeFormatWarning, load_caffe, write_random_caffemodel
from edgecnn.importers.caffe.reader import blob_from_array
from edgecnn.importers.caffe.schema import NetParameter

LENET = Path(__file__).parents[2] / "fixtures" / "caffe" / "lenet.deploy.prototxt"
SMALL = """
name: "small"
input: "data"
input_shape { dim: 1 dim: 2 dim: 5 dim: 5 }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv" convolution_param { num_output: 3 kernel_size: 3 } }
layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }
layer { name: "fc" type: "InnerProduct" bottom: "conv" top: "fc" inner_product_param { num_output: 2 } }
"""


def write(tmp_path: Path, text: str, name: str = "net.prototxt") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.fixture
def small(tmp_path: Path) -> tuple[Path, Path]:
    prototxt = write(tmp_path, SMALL)
    caffemodel = tmp_path / "small.caffemodel"
    write_random_caffemodel(prototxt, caffemodel, seed=1)
    return prototxt, caffemodel


def test_prototxt_without_weights_is_refused(small: tuple[Path, Path]) -> None:
    with pytest.raises(ModelFormatError, match="pass weights="):
        edgecnn.load(small[0])


def test_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, SMALL.replace('top: "fc"', 'top "fc"'))
    with pytest.raises(ModelFormatError, match=r"net.prototxt:7:"):
        load_caffe(path, random_seed=0)


def test_unknown_fields_are_skipped_with_a_warning(tmp_path: Path) -> None:
    path = write(tmp_path, SMALL.replace('type: "ReLU"', 'type: "ReLU" frobnicate: 3'))
    with pytest.warns(CaffeFormatWarning, match="frobnicate"):
        load_caffe(path, random_seed=0)


def test_every_unsupported_layer_is_listed(tmp_path: Path) -> None:
    text = SMALL + 'layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc" top: "loss" }\n'
    text += 'layer { name: "crop" type: "Crop" bottom: "fc" top: "crop" }\n'
    with pytest.raises(UnsupportedOperatorError, match=r"Crop, SoftmaxWithLoss at node\(s\): loss .*crop"):
        load_caffe(write(tmp_path, text), random_seed=0)


def test_dangling_bottom(tmp_path: Path) -> None:
    path = write(tmp_path, SMALL.replace('bottom: "conv" top: "fc"', 'bottom: "nope" top: "fc"'))
    with pytest.raises(ModelFormatError, match=r"layer 'fc' \(InnerProduct\): reads blob\(s\) nope"):
        load_caffe(path, random_seed=0)


def test_missing_input_declaration(tmp_path: Path) -> None:
    text = "\n".join(line for line in SMALL.splitlines() if not line.startswith("input"))
    with pytest.raises(ModelFormatError, match="declares no input"):
        load_caffe(write(tmp_path, text), random_seed=0)


def test_bad_geometry(tmp_path: Path) -> None:
    path = write(tmp_path, SMALL.replace("num_output: 3 kernel_size: 3", "num_output: 3 kernel_size: 9"))
    with pytest.raises(ModelFormatError, match=r"layer 'conv' \(Convolution\)"):
        load_caffe(path, random_seed=0)


def test_weights_of_the_wrong_shape(small: tuple[Path, Path], tmp_path: Path) -> None:
    net = NetParameter()
    net.ParseFromString(small[1].read_bytes())
    net.layer[0].blobs[0].CopyFrom(blob_from_array(np.zeros((3, 2, 2, 2), np.float32)))
    bad = tmp_path / "bad.caffemodel"
    bad.write_bytes(net.SerializeToString())
    with pytest.raises(
        ModelFormatError, match=r"layer 'conv' blob 0 \(weights\): expected shape \[3, 2, 3, 3\]"
    ):
        load_caffe(small[0], bad)


def test_layer_missing_from_the_caffemodel(small: tuple[Path, Path], tmp_path: Path) -> None:
    net = NetParameter()
    net.ParseFromString(small[1].read_bytes())
    del net.layer[1]
    bad = tmp_path / "bad.caffemodel"
    bad.write_bytes(net.SerializeToString())
    with pytest.raises(ModelFormatError, match="layer 'fc' has no weights"):
        load_caffe(small[0], bad)


def test_blob_count_disagreeing_with_its_shape(small: tuple[Path, Path], tmp_path: Path) -> None:
    net = NetParameter()
    net.ParseFromString(small[1].read_bytes())
    net.layer[0].blobs[0].shape.dim[0] = 1 << 40
    bad = tmp_path / "bad.caffemodel"
    bad.write_bytes(net.SerializeToString())
    with pytest.raises(ModelFormatError, match=r"implausibly large|needs"):
        load_caffe(small[0], bad)


def test_not_a_caffemodel(small: tuple[Path, Path], tmp_path: Path) -> None:
    bad = tmp_path / "bad.caffemodel"
    bad.write_bytes(b"\xff\xff\xff\xff garbage")
    with pytest.raises(ModelFormatError, match="not a valid caffemodel"):
        load_caffe(small[0], bad)


def test_weights_embedded_in_the_prototxt(small: tuple[Path, Path], tmp_path: Path) -> None:
    from google.protobuf import text_format

    net = NetParameter()
    text_format.Parse(SMALL, net)
    weights = NetParameter()
    weights.ParseFromString(small[1].read_bytes())
    for layer, trained in zip([net.layer[0], net.layer[2]], weights.layer):
        layer.blobs.extend(trained.blobs)
    embedded = write(tmp_path, text_format.MessageToString(net), "embedded.prototxt")
    x = np.random.default_rng(0).standard_normal((1, 2, 5, 5)).astype(np.float32)
    np.testing.assert_array_equal(edgecnn.load(embedded)(x), edgecnn.load(small[0], small[1])(x))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutated_caffemodels_fail_cleanly(
    small: tuple[Path, Path], tmp_path: Path, data: st.DataObject
) -> None:
    original = bytearray(small[1].read_bytes())
    cut = data.draw(st.integers(0, len(original)))
    mutated = original[:cut] if data.draw(st.booleans()) else original
    for _ in range(data.draw(st.integers(0, 8))):
        if mutated:
            mutated[data.draw(st.integers(0, len(mutated) - 1))] = data.draw(st.integers(0, 255))
    path = tmp_path / "mutated.caffemodel"
    path.write_bytes(bytes(mutated))
    with contextlib.suppress(ModelFormatError):
        load_caffe(small[0], path)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutated_prototxts_fail_cleanly(tmp_path: Path, data: st.DataObject) -> None:
    text = list(LENET.read_text())
    for _ in range(data.draw(st.integers(1, 6))):
        position = data.draw(st.integers(0, len(text) - 1))
        text[position] = data.draw(st.sampled_from(list('{}:"0123456789 \nxyz-')))
    path = tmp_path / "mutated.prototxt"
    path.write_text("".join(text))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CaffeFormatWarning)
        with contextlib.suppress(ModelFormatError):
            load_caffe(path, random_seed=0)
