"""The `edgecnn` command: run/info/time/demo output, and one-line errors for bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from typer.testing import CliRunner

from edgecnn.cli.app import EXIT_ERROR, app
from edgecnn.cli.demo_cmd import bundled

FACE_MODEL = bundled("simplecnn/face_binary_cls.onnx")
FACE_JPG = bundled("simplecnn/samples/face.jpg")
BG_JPG = bundled("simplecnn/samples/bg.jpg")
FACE_ARGS = ["--bgr", "--scale", "0.00392156862745098", "--softmax"]


def invoke(*args: object) -> object:
    return CliRunner().invoke(app, [str(a) for a in args])


def test_run_face_classifier_prints_the_reference_score() -> None:
    result = invoke("run", FACE_MODEL, FACE_JPG, BG_JPG, *FACE_ARGS)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[1].split() == ["conf:", "0.007086", "0.992914"]
    assert lines[3].split()[0] == "conf:" and float(lines[3].split()[1]) > 0.99


def test_run_json_top_k_and_labels(tmp_path: Path) -> None:
    labels = tmp_path / "labels.txt"
    labels.write_text("background\nface\n")
    result = invoke("run", FACE_MODEL, FACE_JPG, *FACE_ARGS, "--top", "1", "--labels", labels, "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    top = document[0]["outputs"]["conf"]["top"][0]
    assert top == [{"index": 1, "score": pytest.approx(0.992914, abs=1e-6), "label": "face"}]
    assert np.asarray(document[0]["outputs"]["conf"]["values"]).shape == (1, 2)


def test_run_rgb_order_changes_the_scores() -> None:
    result = invoke("run", FACE_MODEL, FACE_JPG, "--rgb", "--scale", "0.00392156862745098", "--softmax")
    assert result.exit_code == 0
    assert result.stdout.splitlines()[1].split()[2] != "0.992914"


def test_run_npy_input_matches_the_python_api(tmp_path: Path) -> None:
    import edgecnn

    x = np.random.default_rng(0).standard_normal((1, 3, 128, 128)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    result = invoke("run", FACE_MODEL, tmp_path / "x.npy", "--json")
    assert result.exit_code == 0, result.output
    got = np.asarray(json.loads(result.stdout)[0]["outputs"]["conf"]["values"], dtype=np.float32)
    np.testing.assert_allclose(got, edgecnn.load(FACE_MODEL)(x), rtol=1e-6)


def test_info_lists_layers_and_totals() -> None:
    result = invoke("info", FACE_MODEL, "--json")
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout)
    ops = [layer["op"] for layer in info["layers"]]
    assert ops == ["Conv", "Relu", "MaxPool", "Conv", "Relu", "MaxPool", "Conv", "Relu", "Flatten", "Gemm"]
    # first conv: 16 x 64 x 64 outputs, each summing 3 x 3 x 3 products
    assert info["layers"][0]["macs"] == 16 * 64 * 64 * 27
    assert info["layers"][0]["params"] == 16 * 27 + 16
    assert info["params"] == sum(layer["params"] for layer in info["layers"])
    memory = info["activation_bytes"]
    assert 0 < memory["planned"] <= memory["naive"]
    assert (
        memory["arena"] > 0 and memory["outside_arena"] >= 4
    )  # the returned output, float32 [1, 2] at least
    assert memory["planned"] == memory["arena"] + memory["outside_arena"]
    text = invoke("info", FACE_MODEL)
    assert text.exit_code == 0 and "Gemm_9" in text.stdout and "MACs" in text.stdout
    assert "arena +" in text.stdout and "outside it" in text.stdout


def qdq_conv_model(path: Path) -> Path:
    """DequantizeLinear -> Conv -> QuantizeLinear, as onnxruntime's QDQ format writes a layer."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    constants = {
        "xs": np.array(0.05, np.float32), "xz": np.array(0, np.int8), "ys": np.array(0.1, np.float32),
        "yz": np.array(0, np.int8), "wq": rng.integers(-127, 128, (4, 3, 3, 3)).astype(np.int8),
        "ws": np.full(4, 0.01, np.float32), "wz": np.zeros(4, np.int8),
    }  # fmt: skip
    graph = helper.make_graph(
        [
            helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["x"]),
            helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"], axis=0),
            helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
            helper.make_node("QuantizeLinear", ["c", "ys", "yz"], ["y"]),
        ],
        "qdq",
        [helper.make_tensor_value_info("xq", TensorProto.INT8, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.INT8, [1, 4, 8, 8])],
        [numpy_helper.from_array(v, k) for k, v in constants.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    onnx.save(model, path)
    return path


def test_info_passes_shows_the_qdq_fold(tmp_path: Path) -> None:
    result = invoke("info", qdq_conv_model(tmp_path / "qdq.onnx"), "--passes")
    assert result.exit_code == 0, result.output
    assert "fold_qdq: 2 change(s)" in result.stdout
    assert "conv (Conv) + " in result.stdout and "-> QLinearConv" in result.stdout
    assert "QLinearConv" in result.stdout.split("fold_qdq")[0]  # the layer table is the folded graph


def test_time_reports_every_iteration_and_layer() -> None:
    result = invoke("time", FACE_MODEL, "--iterations", 3, "--warmup", 1, "--threads", 1, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert len(report["iteration_ms"]) == 3 and report["threads"] == 1
    # Relu_1 is fused into Conv_0 by the passes
    assert [layer["name"] for layer in report["layers"]][:2] == ["Conv_0", "MaxPool_2"]
    assert sum(layer["share"] for layer in report["layers"]) == pytest.approx(1.0)
    text = invoke("time", FACE_MODEL, "--iterations", 2)
    assert text.exit_code == 0 and "average forward" in text.stdout and "[1, 3, 128, 128]" in text.stdout


def dynamic_relu_model(path: Path) -> Path:
    import onnx
    from onnx import helper

    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 3, "H", "W"])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["N", 3, "H", "W"])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "dyn", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_time_and_info_with_symbolic_dimensions(tmp_path: Path) -> None:
    model = dynamic_relu_model(tmp_path / "dyn.onnx")
    shaped = invoke("time", model, "--iterations", 2, "--shape", "2x3x8x8", "--json")
    assert shaped.exit_code == 0, shaped.output
    assert json.loads(shaped.stdout)["inputs"] == {"x": [2, 3, 8, 8]}
    unshaped = invoke("info", model)
    assert unshaped.exit_code == EXIT_ERROR and "--shape" in unshaped.stderr
    fixed_batch = invoke("time", FACE_MODEL, "--batch", 2)
    assert fixed_batch.exit_code == EXIT_ERROR and "expected shape [1, 3, 128, 128]" in fixed_batch.stderr


def test_demo_scores_both_samples() -> None:
    result = invoke("demo", "--iterations", 2)
    assert result.exit_code == 0, result.output
    rows = {line.split()[0]: line.split() for line in result.stdout.splitlines() if ".jpg" in line[:12]}
    assert rows["face.jpg"][1:] == ["0.007086", "0.992914", "face"]
    assert rows["bg.jpg"][-1] == "background"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "missing.onnx", FACE_JPG], "model file not found: missing.onnx"),
        (["run", FACE_MODEL, "missing.jpg"], "input file not found: missing.jpg"),
        (["run", FACE_MODEL, bundled("simplecnn/LICENSE")], "not an image"),
        (["run", FACE_MODEL, FACE_JPG, "--size", "abc"], "size must look like"),
        (["run", FACE_MODEL, FACE_JPG, "--size", "64x64"], "expected shape [1, 3, 128, 128]"),
        (["run", FACE_MODEL, FACE_JPG, "--mean", "1,2"], "mean needs 1 or 3 values"),
        (["run", FACE_MODEL, FACE_JPG, "--std", "0"], "std values must be non-zero"),
        (["run", FACE_MODEL, FACE_JPG, "--layout", "chw"], "layout must be one of"),
        (["run", FACE_MODEL, FACE_JPG, "--labels", "missing.txt"], "cannot read labels file"),
        (["run", bundled("simplecnn/LICENSE"), FACE_JPG], "not a model format"),
        (["info", FACE_MODEL, "--shape", "1x3"], "has rank 2"),
    ],
)
def test_bad_input_is_one_line_and_exit_1(args: list[object], message: str) -> None:
    result = invoke(*args)
    assert result.exit_code == EXIT_ERROR
    assert result.stdout == ""
    assert result.stderr.startswith("error: ") and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_bad_npy_and_wrong_dtype(tmp_path: Path) -> None:
    np.save(tmp_path / "objects.npy", np.array([object()], dtype=object), allow_pickle=True)
    np.save(tmp_path / "f64.npy", np.zeros((1, 3, 128, 128)))
    bad = invoke("run", FACE_MODEL, tmp_path / "objects.npy")
    assert bad.exit_code == EXIT_ERROR and "not a plain .npy array" in bad.stderr
    wrong = invoke("run", FACE_MODEL, tmp_path / "f64.npy")
    assert wrong.exit_code == EXIT_ERROR and "expected dtype float32, got float64" in wrong.stderr


def test_debug_shows_the_traceback() -> None:
    result = invoke("--debug", "run", "missing.onnx", FACE_JPG)
    assert result.exit_code != 0
    assert type(result.exception).__name__ == "ModelNotFoundError"


def test_console_script_entry_point() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "edgecnn", "--version"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stdout.startswith("edgecnn ")


def test_run_on_another_device_gives_the_same_scores() -> None:
    from kernels.gpu.backends.support import opencl_unusable

    reason = opencl_unusable()
    if reason is not None:
        pytest.skip(reason)
    for device in ("reference", "opencl:0"):
        result = invoke("run", FACE_MODEL, FACE_JPG, *FACE_ARGS, "--device", device)
        assert result.exit_code == 0, result.output
        assert result.stdout.splitlines()[1].split() == ["conf:", "0.007086", "0.992914"]
    bad = invoke("time", FACE_MODEL, "--device", "opencl:9")
    assert bad.exit_code == EXIT_ERROR and "no device opencl:9" in bad.stderr


def test_devices_prints_the_opencl_extra_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    import edgecnn.devices

    monkeypatch.setattr(edgecnn.devices, "list_devices", lambda: [edgecnn.devices.cpu_device()])
    result = invoke("devices")
    assert result.exit_code == 0, result.output
    assert "pip install 'edgecnn[opencl]' pocl-binary-distribution" in result.stdout


def test_info_prints_symbolic_shapes_and_bracketed_names(tmp_path: Path) -> None:
    """Names and shapes reach the terminal as written: rich would read '[batch, 4]' as a tag."""
    x = onnx.helper.make_tensor_value_info("x[in]", onnx.TensorProto.FLOAT, ["batch", 4])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", 4])
    node = onnx.helper.make_node("Relu", ["x[in]"], ["y"], name="relu[0]")
    model = onnx.helper.make_model(
        onnx.helper.make_graph([node], "g", [x], [y]), opset_imports=[onnx.helper.make_opsetid("", 13)]
    )
    path = tmp_path / "m[1].onnx"
    onnx.save(model, path)
    result = invoke("info", path, "--shape", "2x4")
    assert result.exit_code == 0, result.output
    for text in (str(path), "x[in]: float32[batch, 4]", "relu[0]"):
        assert text in result.stdout
