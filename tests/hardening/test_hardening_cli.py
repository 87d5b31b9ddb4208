"""Issue 34's CLI cases: exit statuses (1 the user's or environment's error, 2 a bug, 130
interrupted), options refused before they allocate, and model text escaped before printing."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from onnx import helper
from PIL import Image
from typer.testing import CliRunner

from edgecnn.cli.app import EXIT_ERROR, EXIT_INTERNAL, EXIT_INTERRUPTED, app, reports_errors
from edgecnn.cli.demo_cmd import bundled
from edgecnn.vision.sources import FrameError, read_image
from hardening.support import onnx_file, run_child

FACE_MODEL = bundled("simplecnn/face_binary_cls.onnx")  # declares [1, 3, 128, 128]
FACE_JPG = bundled("simplecnn/samples/face.jpg")

CLI_IN_CHILD = """
import sys
from typer.testing import CliRunner
from edgecnn.cli.app import app
outcome = CliRunner().invoke(app, sys.argv[1:])
result = {"exit_code": outcome.exit_code, "output": outcome.output}
"""


def invoke(*args: object, env: dict[str, str] | None = None) -> object:
    return CliRunner().invoke(app, [str(a) for a in args], env=env)


@pytest.fixture(scope="module")
def hostile_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Relu whose node name clears the screen and sets the terminal's title, with a symbolic batch."""
    node = helper.make_node("Relu", ["x"], ["y"], name="re\x1b]0;PWNED\x07lu\x1b[2J")
    return onnx_file(tmp_path_factory.mktemp("cli") / "hostile.onnx", [node], [("x", ["n", 1, 28, 28])])


@pytest.mark.parametrize(
    "args",
    [
        ["run", "--threads", "0", FACE_MODEL, FACE_JPG],
        ["run", "--top", "0", FACE_MODEL, FACE_JPG],
        ["time", "--iterations", "0", FACE_MODEL],
        ["run", "--no-such-option", FACE_MODEL, FACE_JPG],
        ["no-such-command"],
        ["--memory-limit", "lots", "info", FACE_MODEL],
    ],
    ids=["threads 0", "top 0", "iterations 0", "unknown option", "unknown command", "bad memory limit"],
)
def test_invalid_options_exit_1(args: list[object]) -> None:
    result = invoke(*args)
    assert result.exit_code == EXIT_ERROR, result.output


def test_bad_environment_values_exit_1() -> None:
    result = invoke("time", FACE_MODEL, "--iterations", "1", env={"EDGECNN_NUM_THREADS": "two"})
    assert result.exit_code == EXIT_ERROR and "EDGECNN_NUM_THREADS must be an integer" in result.output
    result = invoke("info", FACE_MODEL, env={"EDGECNN_MEMORY_LIMIT": "-1"})
    assert result.exit_code == EXIT_ERROR and "EDGECNN_MEMORY_LIMIT" in result.output


def test_scale_nan_is_refused() -> None:
    result = invoke("run", FACE_MODEL, FACE_JPG, "--scale", "nan")
    assert result.exit_code == EXIT_ERROR and "must be finite" in result.output
    result = invoke("run", FACE_MODEL, FACE_JPG, "--mean", "1,inf,2")
    assert result.exit_code == EXIT_ERROR and "must be finite" in result.output


@pytest.mark.parametrize(
    ("raised", "status", "text"),
    [
        (
            OSError(28, "No space left on device", "out.bin"),
            EXIT_ERROR,
            "error: No space left on device: out.bin",
        ),
        (MemoryError(), EXIT_ERROR, "error: out of memory"),
        (KeyboardInterrupt(), EXIT_INTERRUPTED, "interrupted"),
        (RuntimeError("a bug"), EXIT_INTERNAL, "internal error: RuntimeError: a bug"),
    ],
)
def test_exit_status_of_each_kind_of_failure(
    raised: BaseException, status: int, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    def command() -> None:
        raise raised

    with pytest.raises(typer.Exit) as caught:
        reports_errors(command)()
    assert caught.value.exit_code == status
    assert text in capsys.readouterr().err


def test_model_text_is_escaped_in_info_time_and_errors(hostile_model: Path) -> None:
    for args in (["info", hostile_model], ["time", hostile_model, "--iterations", "1", "--warmup", "0"]):
        result = invoke(*args)
        assert result.exit_code == 0, result.output
        assert "\x1b" not in result.output and "\x07" not in result.output
        assert "re\\x1b]0;PWNED\\x07lu\\x1b[2J" in result.output
    result = invoke("info", hostile_model, "--shape", "1x1x28")  # a rank the Relu's input refuses
    assert result.exit_code == EXIT_ERROR
    assert "\x1b" not in result.output


def test_info_shape_goes_through_the_memory_budget(hostile_model: Path) -> None:
    """`info --shape 1000000x1x28x28` took 9.2 GB before; now the example input is refused first."""
    result = run_child(
        CLI_IN_CHILD, "--memory-limit", "512M", "info", str(hostile_model), "--shape", "1000000x1x28x28"
    )
    assert result["exit_code"] == EXIT_ERROR, result
    assert (
        "input 'x' [1000000, 1, 28, 28]" in result["output"] and "over the memory limit" in result["output"]
    )
    assert result["peak_mb"] < 700, result


def test_run_size_is_checked_before_images_are_decoded() -> None:
    """`run --size 20000x20000` took 25 s and 15.7 GB before the shape error."""
    result = run_child(CLI_IN_CHILD, "run", FACE_MODEL, FACE_JPG, "--size", "20000x20000")
    assert result["exit_code"] == EXIT_ERROR, result
    assert (
        "expected shape [1, 3, 128, 128]" in result["output"] or "over the memory limit" in result["output"]
    )
    assert result["peak_mb"] < 700, result


@pytest.fixture(scope="module")
def bomb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """90 Mpixels in a file of about 90 KB: over Pillow's limit, under twice it (where it only warned)."""
    path = tmp_path_factory.mktemp("bomb") / "bomb.png"
    Image.new("L", (9500, 9500)).save(path)
    return path


def test_decompression_bomb_is_an_input_error(bomb: Path) -> None:
    result = invoke("run", FACE_MODEL, bomb)
    assert result.exit_code == EXIT_ERROR, result.output
    assert "decompression bomb" in result.output


def test_decompression_bomb_in_detect_sources_is_a_frame_error(bomb: Path) -> None:
    item = read_image(str(bomb))
    assert isinstance(item, FrameError) and "decompression bomb" in item.message
