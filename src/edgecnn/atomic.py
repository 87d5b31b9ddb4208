"""Atomic file writes: a temporary file beside the target, fsync, then one rename over it.

A reader (or a process that has the old file memory-mapped) sees either the old file or the
whole new one, never half of it; a full disk or a crash leaves the target as it was. Temporaries
are named ``.<target name>.<pid>.<random>.tmp``, so the next write of the same target can tell
one left by a killed process (its pid no longer runs) from one another process is writing now,
and removes the first kind. Failures name the target, never the temporary.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from edgecnn.errors import EdgeCNNError

UNOWNED_TEMPORARY_AGE_S = 600.0
"""A temporary of the target without a pid in its name (written before pids were) counts as
stale once it is this old: no save takes that long without touching its file."""

DEFAULT_MODE = 0o644


def temporary_prefix(target: Path) -> str:
    return f".{target.name}."


def _owner_pid(name: str, prefix: str) -> int | None:
    match = re.fullmatch(re.escape(prefix) + r"(\d+)\.[^.]+\.tmp", name)
    return int(match.group(1)) if match else None


def _process_runs(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # it exists (owned by someone else), or we cannot tell: keep its file
    return True


def stale_temporaries(target: Path) -> list[Path]:
    """Temporaries of ``target`` left by writes that cannot finish any more."""
    prefix = temporary_prefix(target)
    found = []
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return []
    for entry in entries:
        if not (entry.name.startswith(prefix) and entry.name.endswith(".tmp")):
            continue
        pid = _owner_pid(entry.name, prefix)
        if pid is not None:
            stale = pid != os.getpid() and not _process_runs(pid)
        else:
            try:
                stale = time.time() - entry.stat(follow_symlinks=False).st_mtime > UNOWNED_TEMPORARY_AGE_S
            except OSError:
                continue
        if stale:
            found.append(Path(entry.path))
    return found


def remove_stale_temporaries(target: Path) -> list[Path]:
    """Delete the stale temporaries of ``target``; returns those removed (best effort)."""
    removed = []
    for path in stale_temporaries(target):
        with contextlib.suppress(OSError):
            path.unlink()
            removed.append(path)
    return removed


def _target_mode(target: Path, default: int) -> int:
    try:
        info = os.stat(target)
    except OSError:
        return default
    return stat.S_IMODE(info.st_mode) if stat.S_ISREG(info.st_mode) else default


def atomic_write(
    target: str | os.PathLike[str],
    write: Callable[[BinaryIO], object],
    *,
    error: type[EdgeCNNError],
    what: str = "file",
    mode: int | None = None,
) -> None:
    """Write ``target`` through ``write(file)`` atomically; an OSError becomes ``error`` naming it.

    The new file keeps the permission bits of the file it replaces, else gets ``mode`` (0644 when
    None). Exceptions ``write`` raises on purpose (an EdgeCNNError) pass through unchanged, after
    the temporary is removed."""
    path = Path(target)
    folder = path.parent
    if path.is_dir():
        raise error(f"cannot write {what} {path}: it is a directory")
    remove_stale_temporaries(path)
    permissions = _target_mode(path, DEFAULT_MODE if mode is None else mode)
    try:
        fd, temp_name = tempfile.mkstemp(
            prefix=f"{temporary_prefix(path)}{os.getpid()}.", suffix=".tmp", dir=folder
        )
    except OSError as exc:
        raise error(f"cannot write {what} {path}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temp_name, permissions)
        os.replace(temp_name, path)
    except OSError as exc:
        Path(temp_name).unlink(missing_ok=True)
        raise error(f"cannot write {what} {path}: {exc.strerror or exc}") from None
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
    _sync_directory(folder)


def _sync_directory(folder: Path) -> None:
    """Make the rename itself durable (where the OS allows opening a directory)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
