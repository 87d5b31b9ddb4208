"""FrequencyControl: pins and releases a set of frequency domains, every change journaled first
and undone on release, on leaving the ``with`` block (normally, on an exception, on SIGINT or on
SIGTERM), and on the next start after a crash (the journal a killed process left is replayed)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from edgecnn.dvfs.domains import Domain
from edgecnn.dvfs.journal import Journal, recover
from edgecnn.errors import DeviceError
from edgecnn.paths import cache_dir


def default_journal() -> Path:
    return cache_dir("dvfs", "restore.json")


class Terminated(Exception):
    """SIGTERM arrived: unwinds the governor like Ctrl-C does, so that its ``finally`` restores."""


class FrequencyControl:
    """``with FrequencyControl(domains, journal=...) as control: control.pin_max() ...``"""

    def __init__(
        self,
        domains: Sequence[Domain],
        *,
        journal: Path | None = None,
        log: Callable[[str], object] = print,
    ) -> None:
        if not domains:
            raise DeviceError("no frequency domain to control")
        self.domains = list(domains)
        self.journal = Journal(journal or default_journal())
        self.log = log
        self.pinned: dict[str, int] = {}  # domain name -> kHz, while pinned
        self._previous_term: Any = None

    def __enter__(self) -> FrequencyControl:
        recovered = recover(self.journal.path)
        if recovered is not None:
            pid, problems = recovered
            self.log(f"restored the frequency settings left by governor pid {pid} ({self.journal.path})")
            for problem in problems:
                self.log(f"  {problem}")
        if threading.current_thread() is threading.main_thread():
            self._previous_term = signal.signal(signal.SIGTERM, _raise_terminated)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            self.release()
        finally:
            if self._previous_term is not None:
                signal.signal(signal.SIGTERM, self._previous_term)
                self._previous_term = None

    def pin(self, domain: Domain, khz: int) -> None:
        """Pins one domain to ``khz`` (one of its levels)."""
        domain.pin(khz, self.journal)
        self.pinned[domain.name] = khz

    def pin_max(self) -> None:
        """Every domain at its highest level (already pinned there: nothing is written)."""
        for domain in self.domains:
            top = domain.frequencies()[-1]
            if self.pinned.get(domain.name) != top:
                self.pin(domain, top)

    def release(self) -> None:
        """Restores every original value: the default governor is in control again. A value that
        cannot be restored stays in the journal for the next start, and raises DeviceError."""
        self.pinned.clear()
        if not self.journal.changes:
            return
        problems = self.journal.restore()
        if self.journal.changes:
            raise DeviceError(
                "could not restore the frequency settings: "
                + "; ".join(problems)
                + f" (kept in {self.journal.path} for the next start)"
            )
        for problem in problems:
            self.log(f"restore: {problem}")


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated(f"signal {signum}")
