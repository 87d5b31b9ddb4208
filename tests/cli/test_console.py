"""The progress bar of the commands that time runs: no background redraws, one redraw per step."""

from __future__ import annotations

import threading

from rich.progress import TextColumn

from edgecnn.cli.console import measuring_progress, step


def test_measuring_progress_starts_no_refresh_thread() -> None:
    before = {t.ident for t in threading.enumerate()}
    with measuring_progress(TextColumn("{task.description}"), disable=False) as progress:
        started = [t for t in threading.enumerate() if t.ident not in before]
        assert not progress.live.auto_refresh
        assert started == []  # rich's refresh thread would redraw during the timed runs


def test_step_counts_relabels_and_redraws() -> None:
    with measuring_progress(TextColumn("{task.description}"), disable=False) as progress:
        task = progress.add_task("preparing", total=3)
        advance = step(progress, task)
        redraws = []
        progress.refresh = lambda: redraws.append(1)  # type: ignore[method-assign]
        advance("resnet50 b1")
        advance()
        assert progress.tasks[0].completed == 2
        assert progress.tasks[0].description == "resnet50 b1"
        assert len(redraws) == 2
