"""`edgecnn devices`: what this machine offers to run models on (the names device= accepts)."""

from __future__ import annotations

import dataclasses
import json
from typing import Literal

import typer
from rich.table import Table

from edgecnn.cli.console import console, human_bytes

NAME = "devices"


def command(
    as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON."),
) -> None:
    """List the CPU, every OpenCL device (opencl:N) and CUDA GPU (cuda:N) of this machine."""
    from edgecnn.devices import list_devices

    found = list_devices()
    if as_json:
        print(json.dumps([dataclasses.asdict(d) for d in found], indent=2))
        return
    table = Table(box=None, header_style="bold")
    for column in ("device", "type", "name", "vendor", "units", "memory", "platform"):
        justify: Literal["left", "right"] = "right" if column in ("units", "memory") else "left"
        table.add_column(column, justify=justify, no_wrap=column in ("device", "units", "memory"))
    for d in found:
        table.add_row(
            d.name,
            d.device_type,
            d.label,
            d.vendor,
            str(d.compute_units),
            human_bytes(d.memory_bytes),
            d.platform,
        )
    console.print(table)
    if not any(d.kind == "opencl" for d in found):
        console.print(
            "no OpenCL device: install pyopencl and a driver (pip install 'edgecnn[opencl]' "
            "pocl-binary-distribution for the CPU)"
        )
