"""The restore journal: every sysfs value the governor is about to change, saved to a file
(atomically, fsynced) before the change, so that the next start can undo what a killed governor
left behind. Values are restored newest first, which undoes paired writes (min/max) in the order
that keeps min <= max valid."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from edgecnn.atomic import atomic_write
from edgecnn.dvfs.sysfs import write_text
from edgecnn.errors import DeviceError

VERSION = 1


@dataclass(frozen=True)
class Change:
    path: str
    original: str


@dataclass
class Journal:
    """The changes made by this process, mirrored in ``path`` while any are outstanding."""

    path: Path
    changes: list[Change] = field(default_factory=list)

    def record(self, target: Path, original: str) -> bool:
        """Saves ``target``'s original value before it is first changed; False when it already was."""
        if any(c.path == str(target) for c in self.changes):
            return False
        self.changes.append(Change(str(target), original))
        self._save()
        return True

    def forget(self, target: Path) -> None:
        """Drops ``target``'s entry (its change was refused: there is nothing to undo)."""
        self.changes = [c for c in self.changes if c.path != str(target)]
        if self.changes:
            self._save()
        else:
            self.path.unlink(missing_ok=True)

    def restore(self) -> list[str]:
        """Writes every original value back, newest first; returns a line per file that could not
        be restored (a file that disappeared is dropped: there is nothing left to restore). The
        file is removed once nothing is outstanding, else it keeps what failed."""
        problems: list[str] = []
        kept: list[Change] = []
        for change in reversed(self.changes):
            target = Path(change.path)
            if not target.exists():
                problems.append(f"{target} disappeared; nothing to restore")
                continue
            try:
                write_text(target, change.original)
            except DeviceError as exc:
                problems.append(str(exc))
                kept.append(change)
        self.changes = list(reversed(kept))
        if self.changes:
            self._save()
        else:
            self.path.unlink(missing_ok=True)
        return problems

    def _save(self) -> None:
        record = {
            "version": VERSION,
            "pid": os.getpid(),
            "started": start_ticks(os.getpid()),
            "changes": [{"path": c.path, "original": c.original} for c in self.changes],
        }
        write_atomically(self.path, json.dumps(record, indent=1) + "\n")


def write_atomically(path: Path, data: str | bytes) -> None:
    """``edgecnn.atomic.atomic_write`` of ``data``, its folder made first; failures are DeviceErrors."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DeviceError(f"cannot write {path}: {exc.strerror or exc}") from None
    payload = data.encode() if isinstance(data, str) else data
    atomic_write(path, lambda out: out.write(payload), error=DeviceError)


def start_ticks(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot, /proc/PID/stat's 22nd field), which
    tells a live governor from an unrelated process that reused its pid; None where unreadable."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rpartition(")")[2].split()[19]


def governor_alive(pid: int, started: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return started is None or start_ticks(pid) in (None, started)


def recover(path: Path) -> tuple[int, list[str]] | None:
    """Undoes the changes a governor that died left in ``path``: None without a journal, else the
    dead governor's pid and the problems met. A journal of a governor still running is refused
    (two governors would fight over the same files)."""
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text())
        pid = int(record["pid"])
        started = record.get("started")
        changes = [Change(str(c["path"]), str(c["original"])) for c in record["changes"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DeviceError(f"the restore journal {path} is unreadable ({exc}); check and remove it") from None
    if pid != os.getpid() and governor_alive(pid, started):
        raise DeviceError(f"another governor (pid {pid}) holds {path}; stop it first")
    journal = Journal(path, changes)
    return pid, journal.restore()
