"""`edgecnn devices` (the command module, mounted on a small Typer app as the CLI will mount it)."""

from __future__ import annotations

import json
import sys

import pytest
import typer
from typer.testing import CliRunner

from edgecnn.cli import devices_cmd
from edgecnn.devices import list_devices


def invoke(*args: str) -> str:
    app = typer.Typer()
    app.command(name=devices_cmd.NAME)(devices_cmd.command)
    app.command(name="unused")(lambda: None)  # two commands: the name is required, as in edgecnn
    result = CliRunner().invoke(app, [devices_cmd.NAME, *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_table_lists_every_device() -> None:
    output = invoke()
    for column in ("device", "type", "name", "units", "memory"):
        assert column in output
    for device in list_devices():
        assert device.name in output


def test_json_lists_every_device() -> None:
    listed = json.loads(invoke("--json"))
    assert [d["name"] for d in listed] == [d.name for d in list_devices()]
    assert listed[0]["kind"] == "cpu" and listed[0]["compute_units"] >= 1


def test_without_opencl_the_table_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyopencl", None)
    assert "no OpenCL device: install pyopencl" in invoke()
