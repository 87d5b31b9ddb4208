"""`edgecnn govern`: seed 001's scene-aware frequency governor (Algorithm 5.1) in the foreground."""

from __future__ import annotations

from pathlib import Path
from typing import IO

import typer

from edgecnn.cli.console import console, error_console, headline
from edgecnn.errors import InputError

NAME = "govern"
EXIT_TERMINATED = 143  # 128 + SIGTERM, as a shell reports a process that SIGTERM ended


def parse_cpus(text: str | None) -> list[int] | None:
    """``0,2-3`` -> [0, 2, 3]; None for every CPU."""
    if text is None:
        return None
    cpus: list[int] = []
    try:
        for part in text.split(","):
            low, _, high = part.strip().partition("-")
            cpus.extend(range(int(low), int(high or low) + 1))
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a CPU list such as 0,2-3", param_hint="--cpus") from None
    if not cpus or min(cpus) < 0:
        raise typer.BadParameter(f"{text!r} is not a CPU list such as 0,2-3", param_hint="--cpus")
    return sorted(set(cpus))


def open_log(path: Path) -> IO[str]:
    """The decisions log, opened for appending (a log grows line by line; it is not rewritten)."""
    try:
        return open(path, "a", buffering=1)
    except OSError as exc:
        raise InputError(f"cannot open the decisions log {path}: {exc.strerror or exc}") from None


def command(
    template: Path | None = typer.Option(
        None, help="Scene template JSON (docs/governor.md: how to make one); default: the bundled one."
    ),
    threshold: float | None = typer.Option(None, min=0.0, help="DTW_TH (default: the template file's)."),
    hysteresis: float | None = typer.Option(
        None,
        min=0.0,
        help="DTW units above DTW_TH before a CNN verdict is dropped (default: the template's).",
    ),
    window: int | None = typer.Option(
        None, min=21, help="Samples M in the window (default: the template's)."
    ),
    period: float = typer.Option(0.05, min=0.005, help="Sampling period in seconds (seed 001: 0.05)."),
    stride: int = typer.Option(1, min=1, help="Samples between two classifications."),
    hold: int = typer.Option(20, min=0, help="Samples a decision is kept at least (20: 1 s at 50 ms)."),
    cpus: str | None = typer.Option(None, help="CPUs to govern and sample, e.g. 0-3 (default: all)."),
    devfreq: list[str] = typer.Option([], help="A devfreq device to pin too (repeatable), e.g. a GPU."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Log the decisions; write nothing to sysfs."),
    replay: Path | None = typer.Option(None, help="Replay this --trace CSV instead of sampling live."),
    speed: float = typer.Option(1.0, min=0.0, help="Replay speed (0: as fast as possible)."),
    source: str = typer.Option(
        "system", help="Replayed load: system (cpuN_pct), scene or demand (lab traces)."
    ),
    duration: float | None = typer.Option(None, min=0.0, help="Stop after this many seconds."),
    decisions: Path | None = typer.Option(None, help="Append every classification to this JSON-lines file."),
    journal: Path | None = typer.Option(None, help="Restore journal (default: in edgecnn's cache)."),
    restore: bool = typer.Option(
        False, "--restore", help="Only undo what a killed governor left, then exit."
    ),
    cpufreq_root: Path = typer.Option(Path("/sys/devices/system/cpu"), hidden=True),
    devfreq_root: Path = typer.Option(Path("/sys/class/devfreq"), hidden=True),
) -> None:
    """Pin the CPUs (and devfreq devices) to their highest frequency while the load looks like a
    CNN app's, hand them back to the default governor otherwise (seed 001's Algorithm 5.1). Every
    change is undone on exit, Ctrl-C, SIGTERM, and on the next start after a crash."""
    from contextlib import ExitStack

    from edgecnn.dvfs.classifier import SceneClassifier
    from edgecnn.dvfs.control import FrequencyControl, Terminated, default_journal
    from edgecnn.dvfs.domains import select_domains
    from edgecnn.dvfs.governor import Governor, live_samples, replayed_samples
    from edgecnn.dvfs.journal import recover
    from edgecnn.dvfs.scenes import SceneConfig, bundled_template
    from edgecnn.dvfs.traces import read_trace

    journal_path = journal or default_journal()
    if restore:
        recovered = recover(journal_path)
        if recovered is None:
            console.print(f"nothing to restore ({journal_path} does not exist)")
            return
        pid, problems = recovered
        console.print(f"restored the settings left by governor pid {pid}")
        for problem in problems:
            error_console.print(f"  {problem}")
        return
    config = SceneConfig.load(template or bundled_template())
    chosen = parse_cpus(cpus)
    classifier = SceneClassifier(
        config.template,
        threshold if threshold is not None else config.threshold,
        window=window or config.window,
        period=period,
        stride=stride,
        psi=config.psi,
        hysteresis=config.hysteresis if hysteresis is None else hysteresis,
    )
    console.print(
        headline(
            "govern",
            f": template {len(config.template)} samples ({config.source}), "
            f"DTW_TH {classifier.threshold:g}, M {classifier.window}, every {period * 1e3:g} ms",
        )
    )
    try:
        with ExitStack() as stack:
            control = None
            if not dry_run:
                domains = select_domains(
                    chosen, devfreq, cpufreq_root=cpufreq_root, devfreq_root=devfreq_root
                )
                control = stack.enter_context(
                    FrequencyControl(domains, journal=journal_path, log=console.print)
                )
                described = ", ".join(
                    f"{d.name} ({d.kind}, top {d.frequencies()[-1] // 1000} MHz)" for d in domains
                )
                console.print(f"governing {described}; restore journal {journal_path}")
            log = stack.enter_context(open_log(decisions)) if decisions is not None else None
            if replay is not None:
                samples = replayed_samples(read_trace(replay, source=source, cpus=chosen), speed=speed)
            else:
                samples = live_samples(period, chosen, cpufreq_root=cpufreq_root)
            governor = Governor(classifier, control, log=console.print, decisions=log, hold=hold)
            report = governor.run(samples, stop=lambda: duration is not None and governor.seconds >= duration)
    except Terminated:
        console.print("terminated: the frequency settings are restored")
        raise typer.Exit(EXIT_TERMINATED) from None
    except KeyboardInterrupt:
        console.print("interrupted: the frequency settings are restored")
        raise
    console.print(
        f"{report.samples} samples, {report.pins} pin(s), {report.releases} release(s); the governor "
        f"used {report.cpu_s:.2f} s of CPU in {report.wall_s:.1f} s ({report.cpu_share * 100:.2f}% of one core)"
    )
