"""`edgecnn demo`'s detection part: boxes printed and the annotated scene written."""

from __future__ import annotations

from pathlib import Path

from PIL import Image
from typer.testing import CliRunner

from edgecnn.cli.app import app


def test_demo_detects_faces_and_writes_the_scene(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["demo", "--iterations", "1", "--save", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "face detection" in result.stdout and "scene.jpg" in result.stdout
    assert Image.open(tmp_path / "scene.jpg").size == (320, 240)
