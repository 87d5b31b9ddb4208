"""Shared terminal output: consoles, the progress bars of commands that time or train things, and
human-readable numbers.

The consoles read no markup: what the commands print holds user data (paths, tensor names, shapes
such as ``[batch, 3, 224, 224]``, extras such as ``edgecnn[opencl]``) that rich would take for tags
and swallow. Emphasis is a style (``headline``), never a tag in the text. Nor do they escape
control characters: text from model files goes through ``sanitize`` first."""

from __future__ import annotations

import re
from collections.abc import Callable

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
)
from rich.text import Text

console = Console(highlight=False, soft_wrap=True, markup=False)
error_console = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""C0 and C1 control characters (escape sequences that clear the screen or set the window title
start with one) and the bidirectional overrides that make text read differently than it is."""

MAX_SHOWN_CHARS = 4000
"""A name or message longer than this is cut, saying how much was left out."""


def sanitize(text: object, *, newlines: bool = False) -> str:
    """``text`` safe to print on a terminal: control characters shown as escapes (``\\x1b``),
    line breaks too unless ``newlines`` (edgecnn's own multi-line messages), and cut beyond
    MAX_SHOWN_CHARS. Names and messages that come from model files go through here."""
    value = str(text)
    if len(value) > MAX_SHOWN_CHARS:
        value = f"{value[:MAX_SHOWN_CHARS]}... ({len(value) - MAX_SHOWN_CHARS} more characters)"

    def escape(match: re.Match[str]) -> str:
        char = match.group()
        return char if newlines and char == "\n" else char.encode("unicode_escape").decode("ascii")

    return _CONTROL.sub(escape, value)


def headline(subject: object, rest: str = "") -> Text:
    """``subject`` in bold followed by ``rest``, both printed as they are (no markup)."""
    return Text.assemble((str(subject), "bold"), rest)


def measuring_progress(*columns: ProgressColumn, disable: bool) -> Progress:
    """A transient progress bar on stderr for commands that time runs (bench, time, tune): label
    columns, the bar, done/total, then ``columns``' last ones. It is redrawn only when a step is
    counted (``step``), between timed runs: rich's default refresh thread redraws ten times a second
    from a thread of its own, which on a small machine takes a core (and the GIL) in the middle of
    a measurement."""
    label, *rest = columns
    return Progress(
        label,
        BarColumn(),
        MofNCompleteColumn(),
        *rest,
        console=error_console,
        transient=True,
        disable=disable,
        auto_refresh=False,
    )


def training_progress(show: bool) -> Progress:
    """A transient progress bar on stderr for training and retraining: label, bar, done/total, the
    last batch's loss (the task's ``loss`` field) and the time left."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("loss {task.fields[loss]:.4f}"),
        TimeRemainingColumn(),
        console=error_console,
        transient=True,
        disable=not show,
    )


def step(progress: Progress, task: TaskID) -> Callable[..., None]:
    """A callback that counts one step of ``task`` (its first argument, if any, becomes the label)
    and redraws the bar at once."""

    def advance(*label: object) -> None:
        if label and isinstance(label[0], str):
            progress.update(task, advance=1, description=label[0], refresh=True)
        else:
            progress.update(task, advance=1, refresh=True)

    return advance


def human_count(n: float) -> str:
    """1234567 -> '1.23M' (parameters, MACs)."""
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.2f}{unit}"
    return f"{n:.0f}"


def human_bytes(n: float) -> str:
    """1536 -> '1.5 KiB'."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"
