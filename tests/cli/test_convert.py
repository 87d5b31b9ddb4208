"""`edgecnn convert`: every fixture format round-trips to .ecnn with identical outputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import edgecnn
from edgecnn.cli.app import EXIT_ERROR, app
from edgecnn.cli.demo_cmd import bundled
from edgecnn.importers.caffe import write_random_caffemodel
from edgecnn.importers.darknet import write_random_weights

TESTS = Path(__file__).parents[1]
CAFFE = TESTS / "fixtures" / "caffe"
DARKNET = TESTS / "fixtures" / "darknet"
RADAR = TESTS / "importers" / "radar" / "data" / "patent_aircraft.bin"


def weights_for(model: Path, tmp_path: Path) -> Path | None:
    if model.suffix == ".prototxt":
        weights = tmp_path / "net.caffemodel"
        write_random_caffemodel(model, weights, seed=0)
        return weights
    if model.suffix == ".cfg":
        weights = tmp_path / "net.weights"
        write_random_weights(model, weights, seed=0)
        return weights
    return None


FIXTURES = [
    bundled("simplecnn/face_binary_cls.onnx"),
    CAFFE / "lenet.deploy.prototxt",
    CAFFE / "bvlc_googlenet.deploy.prototxt",
    DARKNET / "tiny.cfg",
    DARKNET / "yolov2-tiny.cfg",
    DARKNET / "yolov3-tiny.cfg",
    bundled("darknet/tiny-yolo-seed001.cfg"),
    RADAR,
]


@pytest.mark.parametrize("model", FIXTURES, ids=lambda p: p.name)
def test_convert_round_trips_with_identical_outputs(model: Path, tmp_path: Path) -> None:
    weights = weights_for(model, tmp_path)
    out = tmp_path / "model.ecnn"
    args = ["convert", str(model), "-o", str(out)] + (["--weights", str(weights)] if weights else [])
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"wrote {out}")
    original, converted = edgecnn.load(model, weights), edgecnn.load(out)
    assert [(s.name, s.shape, s.dtype) for s in converted.inputs] == [
        (s.name, s.shape, s.dtype) for s in original.inputs
    ]
    rng = np.random.default_rng(0)
    feeds = {
        s.name: rng.random([d if isinstance(d, int) else 1 for d in s.shape], dtype=np.float32)
        for s in original.inputs
    }
    expected, got = original.run(feeds), converted.run(feeds)
    assert list(got) == list(expected)
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name])


def test_info_shows_the_sections_of_an_ecnn_file(tmp_path: Path) -> None:
    out = tmp_path / "face.ecnn"
    edgecnn.load(bundled("simplecnn/face_binary_cls.onnx")).save(out)
    result = CliRunner().invoke(app, ["info", str(out)])
    assert result.exit_code == 0, result.output
    assert ".ecnn format 1." in result.stdout
    assert [
        line.split()[0] for line in result.stdout.splitlines() if line.strip().startswith(("GRAPH", "DATA"))
    ] == [
        "GRAPH",
        "DATA",
    ]


def test_info_verify_catches_a_flipped_weight_bit(tmp_path: Path) -> None:
    out = tmp_path / "face.ecnn"
    edgecnn.load(bundled("simplecnn/face_binary_cls.onnx")).save(out)
    good = CliRunner().invoke(app, ["info", str(out), "--verify"])
    assert good.exit_code == 0 and "checksums:" in good.stdout
    data = bytearray(out.read_bytes())
    data[-100] ^= 0x10  # inside the last tensor's bytes, before the SHA-256 trailer
    out.write_bytes(bytes(data))
    assert CliRunner().invoke(app, ["info", str(out)]).exit_code == EXIT_ERROR  # default load: weights' CRC
    bad = CliRunner().invoke(app, ["info", str(out), "--verify"])
    assert bad.exit_code == EXIT_ERROR and bad.stderr.startswith("error: ")


def test_convert_to_the_radar_format_and_back(tmp_path: Path) -> None:
    ecnn, back = tmp_path / "radar.ecnn", tmp_path / "radar.bin"
    assert CliRunner().invoke(app, ["convert", str(RADAR), "-o", str(ecnn)]).exit_code == 0
    assert CliRunner().invoke(app, ["convert", str(ecnn), "-o", str(back)]).exit_code == 0
    assert back.read_bytes() == RADAR.read_bytes()


def test_convert_refuses_a_model_outside_the_radar_family(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["convert", str(bundled("simplecnn/face_binary_cls.onnx")), "-o", str(tmp_path / "x.bin")]
    )
    assert result.exit_code == EXIT_ERROR and result.stderr.startswith("error: ")


def test_model_save_with_a_storage_plan(tmp_path: Path) -> None:
    model = edgecnn.load(bundled("simplecnn/face_binary_cls.onnx"))
    weights = {name: "float16" for name, value in model.graph.initializers.items() if value.ndim > 1}
    model.save(tmp_path / "raw.ecnn")
    model.save(tmp_path / "half.ecnn", storage=weights)
    assert (tmp_path / "half.ecnn").stat().st_size < 0.6 * (tmp_path / "raw.ecnn").stat().st_size
    x = np.random.default_rng(0).random((1, 3, 128, 128), dtype=np.float32)
    np.testing.assert_allclose(edgecnn.load(tmp_path / "half.ecnn")(x), model(x), rtol=1e-2, atol=1e-2)
