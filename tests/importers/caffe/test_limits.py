"""Hostile Caffe files end in one ModelFormatError that names file and layer, before allocating.

Peak memory is measured with tracemalloc (numpy and Python objects both report to it).
"""

from __future__ import annotations

import os
import re
import tracemalloc
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from edgecnn.errors import ModelFormatError
from edgecnn.importers.caffe import CaffeFormatWarning, load_caffe, write_random_caffemodel
from edgecnn.importers.caffe.reader import blob_from_array
from edgecnn.importers.caffe.schema import NetParameter
from edgecnn.limits import MemoryBudget

BUDGET = MemoryBudget(64 << 20)
PEAK_LIMIT = 16 << 20
HEAD = 'name: "n"\ninput: "data"\ninput_shape { dim: 1 dim: 3 dim: 8 dim: 8 }\n'
CONV = 'layer {{ name: "conv" type: "Convolution" bottom: "data" top: "conv" convolution_param {{ {} }} }}\n'


@pytest.fixture(autouse=True)
def quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CaffeFormatWarning)
        yield


def refused(prototxt: Path, weights: Path | None = None, **options: object) -> str:
    """The ModelFormatError message of loading ``prototxt``, checking the peak memory on the way."""
    tracemalloc.start()
    try:
        with pytest.raises(ModelFormatError) as caught:
            load_caffe(prototxt, weights, budget=BUDGET, **options)  # type: ignore[arg-type]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < PEAK_LIMIT, f"refusing took {peak} bytes"
    message = str(caught.value)
    assert len(message) < 500
    return message


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "net.prototxt"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "options", "expected"),
    [
        (
            HEAD + CONV.format("num_output: 1000000000 kernel_size: 3"),
            {"random_seed": 0},
            "layer 'conv' blob 0",
        ),
        (HEAD + CONV.format("num_output: 1000000000 kernel_size: 3"), {"structure_only": True}, "blob 0"),
        (HEAD + CONV.format("num_output: 4 kernel_size: 1 pad: 100000"), {"random_seed": 0}, "output 'conv'"),
        (HEAD.replace("dim: 8 dim: 8", "dim: 16000000 dim: 16000000"), {"random_seed": 0}, "input 'data'"),
        (HEAD + "layer { " * 500 + "}" * 500, {"structure_only": True}, "nested too deeply"),
        (
            HEAD + 'layer { name: "a" x ' + "{ y " * 500 + "}" * 501,
            {"structure_only": True},
            "nested too deeply",
        ),
    ],
)
def test_declared_sizes_and_depths_are_refused(
    tmp_path: Path, text: str, options: dict[str, object], expected: str
) -> None:
    message = refused(write(tmp_path, text), **options)
    assert "net.prototxt" in message
    assert re.search(expected, message), message


def test_declared_blob_larger_than_its_data(tmp_path: Path) -> None:
    prototxt = write(tmp_path, HEAD + CONV.format("num_output: 2 kernel_size: 1"))
    model = NetParameter(name="n")
    layer = model.layer.add(name="conv", type="Convolution")
    blob = layer.blobs.add()
    blob.MergeFrom(blob_from_array(np.zeros((2, 3, 1, 1), np.float32)))
    blob.shape.dim[0] = 1 << 40
    weights = tmp_path / "net.caffemodel"
    weights.write_bytes(model.SerializeToString())
    assert "blob 0" in refused(prototxt, weights)


def test_weights_path_that_is_a_directory(tmp_path: Path) -> None:
    prototxt = write(tmp_path, HEAD + CONV.format("num_output: 2 kernel_size: 1"))
    assert refused(prototxt, tmp_path).endswith("is a directory")


def test_prototxt_that_is_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "net.prototxt"
    os.mkfifo(fifo)
    assert "not a regular file" in refused(fifo, structure_only=True)


def test_weights_over_the_budget_are_refused_unread(tmp_path: Path) -> None:
    prototxt = write(tmp_path, HEAD + CONV.format("num_output: 2 kernel_size: 1"))
    weights = tmp_path / "net.caffemodel"
    write_random_caffemodel(prototxt, weights)
    with open(weights, "ab") as f:
        f.truncate(200 << 20)  # sparse: 200 MiB declared, nothing written
    assert "weights file" in refused(prototxt, weights)


def test_long_parse_errors_are_elided(tmp_path: Path) -> None:
    prototxt = write(tmp_path, HEAD + 'layer { name: "' + "a" * 100_000 + '" type: 7 }')
    assert "characters)" in refused(prototxt, structure_only=True)


def test_legacy_layer_without_the_parameter_message(tmp_path: Path) -> None:
    prototxt = write(tmp_path, HEAD + 'layers { name: "f" type: FLATTEN bottom: "data" top: "f" }')
    assert "legacy `layers` form has no flatten_param" in refused(prototxt, structure_only=True)


def test_long_lists_in_layer_messages_are_elided(tmp_path: Path) -> None:
    dilations = " ".join(["dilation: 1048576"] * 1000)
    message = refused(
        write(tmp_path, HEAD + CONV.format(f"num_output: 2 kernel_size: 1 {dilations}")), random_seed=0
    )
    assert "characters)" in message
