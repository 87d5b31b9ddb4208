"""`edgecnn compress` through a one-command typer app (the lead registers it in cli/app.py)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner, Result

from edgecnn.cli import compress_cmd
from edgecnn.errors import InputError
from edgecnn.format import load_ecnn, read_header

FACE_ONNX = Path(str(resources.files("edgecnn") / "data" / "simplecnn" / "face_binary_cls.onnx"))
LENET = Path(__file__).parents[1] / "fixtures" / "caffe" / "lenet.deploy.prototxt"

app = typer.Typer()
app.command(compress_cmd.NAME)(compress_cmd.command)


@app.callback()
def _group() -> None:
    """Keeps `compress` a sub-command, as in the real app."""


def invoke(*args: str) -> Result:
    return CliRunner().invoke(app, ["compress", *args])


def test_prune_and_int8_writes_a_smaller_file_and_prints_the_table(tmp_path: Path) -> None:
    out = tmp_path / "face.ecnn"
    result = invoke(
        str(FACE_ONNX),
        "--prune",
        "0.3",
        "--prune",
        "Gemm_9=0.1",
        "--quantize",
        "int8",
        "--iterations",
        "2",
        "--samples",
        "3",
        "--threads",
        "1",
        "-o",
        str(out),
    )
    assert result.exit_code == 0, result.output
    for text in (
        "Conv_0",
        "Gemm_9",
        "csr:int8",
        "file size",
        "load (file -> graph)",
        "latency (median of 2)",
        "max |output difference|",
        "top-1 agreement (3 inputs)",
        f"wrote {out}",
    ):
        assert text in result.output
    graph = load_ecnn(out, verify=True)
    assert read_header(out).minor == 1
    fc = np.asarray(graph.initializers["classifier.0.weight"])
    assert np.count_nonzero(fc) == round(0.1 * fc.size)  # the override beat the bare KEEP
    assert np.count_nonzero(graph.initializers["41"]) == round(0.3 * graph.initializers["41"].size)
    assert out.stat().st_size < 0.3 * FACE_ONNX.stat().st_size


def test_fp16_without_pruning_on_a_caffe_model(tmp_path: Path) -> None:
    from edgecnn.importers.caffe import write_random_caffemodel

    weights = tmp_path / "lenet.caffemodel"
    write_random_caffemodel(LENET, weights, seed=0)
    out = tmp_path / "lenet.ecnn"
    result = invoke(
        str(LENET),
        "--weights",
        str(weights),
        "--quantize",
        "fp16",
        "--iterations",
        "1",
        "--samples",
        "2",
        "--threads",
        "1",
        "-o",
        str(out),
    )
    assert result.exit_code == 0, result.output
    assert "float16" in result.output and "100%" in result.output  # fp16 keeps LeNet's top-1 on 2 inputs
    assert load_ecnn(out).initializers["ip1/blob0"].dtype == np.float32


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--prune", "half"], "expected KEEP or LAYER=KEEP"),
        (["--prune", "1.5"], "must be in 0..1"),
        (["--prune", "=0.5"], "layer name before '=' is empty"),
        (["--quantize", "int4"], "use int8 or fp16"),
    ],
)
def test_bad_options_are_usage_errors(tmp_path: Path, args: list[str], message: str) -> None:
    result = invoke(str(FACE_ONNX), *args, "-o", str(tmp_path / "x.ecnn"))
    assert result.exit_code == 2 and message in result.output
    assert not (tmp_path / "x.ecnn").exists()


def test_unknown_layer_is_an_input_error(tmp_path: Path) -> None:
    result = invoke(str(FACE_ONNX), "--prune", "fc9=0.5", "-o", str(tmp_path / "x.ecnn"))
    assert isinstance(result.exception, InputError) and "Conv_0, Conv_3, Conv_6, Gemm_9" in str(
        result.exception
    )


def test_parse_prune() -> None:
    assert compress_cmd.parse_prune([]) == (None, {})
    assert compress_cmd.parse_prune(["0.2", "fc6=0.1", "a=b=0.5"]) == (0.2, {"fc6": 0.1, "a=b": 0.5})
