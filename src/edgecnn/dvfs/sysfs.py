"""Reading and writing one sysfs attribute, every failure a DeviceError that says which file and
what the governor needs (root, or write access to that file)."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from edgecnn.errors import DeviceError

NEEDS = "run as root, or make the file writable by this user (e.g. a udev rule)"


def read_text(path: Path) -> str:
    """The attribute's value, stripped."""
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        raise DeviceError(f"{path} disappeared (the device or CPU was removed?)") from None
    except OSError as exc:
        raise DeviceError(f"cannot read {path}: {exc.strerror or exc}") from None


def read_int(path: Path) -> int:
    text = read_text(path)
    try:
        return int(text)
    except ValueError:
        raise DeviceError(f"{path} holds {text!r}, not an integer") from None


def read_words(path: Path) -> list[str]:
    """A space-separated list (available frequencies or governors)."""
    return read_text(path).split()


def write_text(path: Path, value: str) -> None:
    """Writes ``value`` into the attribute. A file without any write permission bit is refused
    before the write: sysfs marks attributes that have no store method 0444, and root would
    otherwise pass the permission check and fail with a less helpful error."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise DeviceError(f"{path} disappeared (the device or CPU was removed?)") from None
    except OSError as exc:
        raise DeviceError(f"cannot reach {path}: {exc.strerror or exc}") from None
    if not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
        raise DeviceError(f"{path} is read-only: this kernel or device does not let it be changed")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
        try:
            os.write(fd, value.encode() + b"\n")
        finally:
            os.close(fd)
    except FileNotFoundError:
        raise DeviceError(f"{path} disappeared (the device or CPU was removed?)") from None
    except PermissionError:
        raise DeviceError(f"no permission to write {path}: {NEEDS}") from None
    except OSError as exc:
        if exc.errno == errno.EROFS:
            raise DeviceError(f"{path} is on a read-only file system") from None
        raise DeviceError(f"writing {value!r} to {path} failed: {exc.strerror or exc}") from None
