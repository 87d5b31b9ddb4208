"""The `edgecnn` command: run, info, time, demo and the rest (one module per command).

Every command reports failures as one line on stderr and a non-zero exit status; `--debug`
(before the command) shows the traceback instead. A bad option value (``typer.BadParameter``,
raised by a command after parsing) is a usage error, reported by click as for values it checks
itself: exit status 2 and a message naming the option."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import typer

from edgecnn import __version__
from edgecnn.cli import (
    batch_cmd,
    bench_cmd,
    compare_cmd,
    compress_cmd,
    convert_cmd,
    demo_cmd,
    detect_cmd,
    devices_cmd,
    energy_cmd,
    govern_cmd,
    info_cmd,
    keygen_cmd,
    monitor_cmd,
    plan_cmd,
    run_cmd,
    time_cmd,
    train_cmd,
    tune_cmd,
)
from edgecnn.cli.console import error_console
from edgecnn.errors import EdgeCNNError

app = typer.Typer(
    name="edgecnn",
    help="A CNN inference engine for the CPUs of edge and embedded devices.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

_settings = {"debug": False}

EXIT_ERROR = 1  # bad model, bad input, unavailable device
EXIT_USAGE = 2  # bad option value or missing argument (click's own status for usage errors)
EXIT_INTERNAL = 3  # a bug in edgecnn
EXIT_INTERRUPTED = 130

P = ParamSpec("P")
R = TypeVar("R")


def reports_errors(command: Callable[P, R]) -> Callable[P, R]:
    """Turn edgecnn's exceptions into one line on stderr and an exit status (unless --debug)."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        if _settings["debug"]:
            return command(*args, **kwargs)
        try:
            return command(*args, **kwargs)
        except EdgeCNNError as exc:
            error_console.print(f"error: {exc}")
            raise typer.Exit(EXIT_ERROR) from None
        except KeyboardInterrupt:
            error_console.print("interrupted")
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except (typer.Exit, typer.Abort, typer.BadParameter):
            raise
        except Exception as exc:
            error_console.print(
                f"internal error: {type(exc).__name__}: {exc} (run `edgecnn --debug ...` for the traceback)"
            )
            raise typer.Exit(EXIT_INTERNAL) from None

    return wrapper


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"edgecnn {__version__}")
        raise typer.Exit()


@app.callback()
def options(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks instead of one-line errors."),
    version: bool = typer.Option(
        False, "--version", callback=_show_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Run, inspect and time CNN models (ONNX, Caffe, Darknet, .ecnn) on the CPU."""
    _settings["debug"] = debug


for module in (
    run_cmd,
    info_cmd,
    plan_cmd,
    time_cmd,
    tune_cmd,
    bench_cmd,
    compare_cmd,
    energy_cmd,
    devices_cmd,
    convert_cmd,
    compress_cmd,
    keygen_cmd,
    train_cmd,
    demo_cmd,
    monitor_cmd,
    detect_cmd,
    batch_cmd,
    govern_cmd,
):
    app.command(name=module.NAME, help=module.command.__doc__)(reports_errors(module.command))


def main() -> None:
    """Console-script entry point."""
    app()
