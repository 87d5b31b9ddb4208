"""The `edgecnn` command: run, info, time, demo and the rest (one module per command).

Every command reports failures as one line on stderr and an exit status; `--debug` (before the
command) shows the traceback instead. Status 1: the user's or the environment's error (an
EdgeCNNError, a bad option value or missing argument, an I/O error, memory exhausted); 2: a bug in
edgecnn; 130: interrupted (Ctrl-C). Text from model files is escaped before it is printed
(console.sanitize)."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

import typer
import typer.core
from typer._click.exceptions import UsageError  # click's, as typer vendors it

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
    sweep_cmd,
    time_cmd,
    train_cmd,
    tune_cmd,
)
from edgecnn.cli.console import error_console, sanitize
from edgecnn.errors import ConfigurationError, EdgeCNNError
from edgecnn.limits import parse_size

EXIT_ERROR = 1  # bad model, input, option or environment; unavailable device; I/O error; out of memory
EXIT_USAGE = EXIT_ERROR  # a bad option value or missing argument is the user's error too
EXIT_INTERNAL = 2  # a bug in edgecnn
EXIT_INTERRUPTED = 130
MEMORY_LIMIT_ENV = "EDGECNN_MEMORY_LIMIT"


class EdgeCNNGroup(typer.core.TyperGroup):
    """Click's usage errors (unknown option, bad or missing value) exit with EXIT_USAGE, not 2,
    which is kept for bugs."""

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().make_context(*args, **kwargs)
        except UsageError as exc:
            exc.exit_code = EXIT_USAGE
            raise

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except UsageError as exc:
            exc.exit_code = EXIT_USAGE
            raise


app = typer.Typer(
    cls=EdgeCNNGroup,
    name="edgecnn",
    help="A CNN inference engine for the CPUs of edge and embedded devices.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

_settings = {"debug": False}

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
            error_console.print(f"error: {sanitize(exc, newlines=True)}")
            raise typer.Exit(EXIT_ERROR) from None
        except KeyboardInterrupt:
            error_console.print("interrupted")
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except (typer.Exit, typer.Abort, UsageError):
            raise
        except MemoryError as exc:
            detail = f" ({sanitize(str(exc))})" if str(exc) else ""
            error_console.print(f"error: out of memory{detail}; try a smaller --memory-limit or input")
            raise typer.Exit(EXIT_ERROR) from None
        except OSError as exc:  # a full disk, a permission, a vanished file: the environment's
            where = f": {sanitize(str(exc.filename))}" if exc.filename else ""
            error_console.print(f"error: {sanitize(exc.strerror or str(exc))}{where}")
            raise typer.Exit(EXIT_ERROR) from None
        except Exception as exc:
            error_console.print(
                f"internal error: {type(exc).__name__}: {sanitize(str(exc))} "
                "(run `edgecnn --debug ...` for the traceback)"
            )
            raise typer.Exit(EXIT_INTERNAL) from None

    return wrapper


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"edgecnn {__version__}")
        raise typer.Exit()


@app.callback()
def options(
    ctx: typer.Context,
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks instead of one-line errors."),
    version: bool = typer.Option(
        False, "--version", callback=_show_version, is_eager=True, help="Print the version and exit."
    ),
    memory_limit: str | None = typer.Option(
        None,
        "--memory-limit",
        help="Most memory one model may take, e.g. 2G (default: EDGECNN_MEMORY_LIMIT, else 80% of "
        "the memory available). Loading, planning and --size/--shape are refused beyond it.",
    ),
) -> None:
    """Run, inspect and time CNN models (ONNX, Caffe, Darknet, .ecnn) on the CPU."""
    _settings["debug"] = debug
    if memory_limit is not None:
        _use_memory_limit(ctx, memory_limit)


def _use_memory_limit(ctx: typer.Context, text: str) -> None:
    """Set EDGECNN_MEMORY_LIMIT for this command (the options every load resolves read it, and
    worker processes inherit it); the previous value comes back when the command ends."""
    try:
        parse_size(text, "--memory-limit")
    except ConfigurationError as exc:
        raise typer.BadParameter(str(exc), param_hint="--memory-limit") from None
    previous = os.environ.get(MEMORY_LIMIT_ENV)
    os.environ[MEMORY_LIMIT_ENV] = text

    def restore() -> None:
        if previous is None:
            os.environ.pop(MEMORY_LIMIT_ENV, None)
        else:
            os.environ[MEMORY_LIMIT_ENV] = previous

    ctx.call_on_close(restore)


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
    sweep_cmd,
):
    app.command(name=module.NAME, help=module.command.__doc__)(reports_errors(module.command))


def main() -> None:
    """Console-script entry point."""
    app()
