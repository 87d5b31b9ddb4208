"""The per-machine cache of kernel choices that `edgecnn tune` measured.

One JSON file (``kernel-tuning.json`` in the cache directory of :mod:`edgecnn.paths`) maps a machine
fingerprint (:func:`edgecnn.devices.machine_fingerprint`) to that machine's entries, each keyed by the
layer's op, attributes, input types, device kind and thread count; a shared home directory seen
from several machines keeps one section per machine. ``select_kernel`` looks every node up here
first. A damaged file is ignored with a warning: tuning only ever changes speed, never results.
"""

from __future__ import annotations

import json
import os
import stat
import threading
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edgecnn.atomic import atomic_write
from edgecnn.devices import machine_description, machine_fingerprint
from edgecnn.errors import ConfigurationError
from edgecnn.ir.graph import Node, TensorType
from edgecnn.paths import cache_dir

CACHE_FILE = "kernel-tuning.json"
FORMAT = "edgecnn-kernel-tuning/1"
MAX_CACHE_BYTES = 64 << 20
"""A larger file is not a cache `edgecnn tune` wrote (a few hundred bytes per layer): ignored unread."""


class TuningCacheWarning(UserWarning):
    """The tuning cache could not be read or written; kernels are chosen by their heuristics."""


def cache_path() -> Path:
    """The tuning cache file."""
    return cache_dir(CACHE_FILE)


def layer_key(
    node: Node,
    input_types: Sequence[TensorType | None],
    input_values: Sequence[np.ndarray | None],
    device_kind: str,
    threads: int,
) -> str:
    """The cache key of one layer: everything its kernels' speed depends on, but not its name.
    That includes the density of constant inputs (to 5%): a pruned layer's fastest kernel (sparse)
    is not the dense layer's of the same shape."""
    shapes = [
        None if t is None else [t.dtype, list(t.shape) if t.shape is not None else None] for t in input_types
    ]
    densities = [
        None if v is None or v.size == 0 else round(np.count_nonzero(v) / v.size * 20) / 20
        for v in input_values
    ]
    return json.dumps(
        [node.op, repr(node.attrs), shapes, densities, device_kind, threads], separators=(",", ":")
    )


@dataclass(frozen=True)
class TunedChoice:
    """The measured winner of one layer and every candidate's time."""

    kernel: str
    times_ms: Mapping[str, float]


def _parse_entries(section: Any) -> dict[str, TunedChoice]:
    if not isinstance(section, dict):
        raise ValueError("a machine's 'entries' is not an object")
    entries: dict[str, TunedChoice] = {}
    for key, value in section.items():
        if not isinstance(value, dict) or not isinstance(value.get("kernel"), str):
            raise ValueError(f"entry {key[:60]!r} has no kernel name")
        times = value.get("times_ms", {})
        if not isinstance(times, dict) or not all(isinstance(t, (int, float)) for t in times.values()):
            raise ValueError(f"entry {key[:60]!r} has malformed times")
        entries[key] = TunedChoice(value["kernel"], {str(k): float(t) for k, t in times.items()})
    return entries


def read_cache(path: Path) -> dict[str, dict[str, TunedChoice]]:
    """{machine fingerprint: {layer key: choice}} from ``path``; empty if the file is absent, and
    empty with a TuningCacheWarning if it is damaged, of any depth or type, or not a regular file
    (a FIFO would block the read, a device never end it)."""
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise OSError("not a regular file")
        if info.st_size > MAX_CACHE_BYTES:
            raise OSError(f"larger than {MAX_CACHE_BYTES >> 20} MiB")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        warnings.warn(f"ignoring kernel tuning cache {path}: {exc}", TuningCacheWarning, stacklevel=2)
        return {}
    try:
        document = json.loads(text)
        if not isinstance(document, dict) or document.get("format") != FORMAT:
            raise ValueError(f"not an {FORMAT} file")
        machines = document.get("machines")
        if not isinstance(machines, dict):
            raise ValueError("no 'machines' object")
        parsed = {}
        for fingerprint, section in machines.items():
            if not isinstance(section, dict):
                raise ValueError(f"machine {fingerprint[:20]!r} is not an object")
            parsed[str(fingerprint)] = _parse_entries(section.get("entries"))
        return parsed
    except (ValueError, RecursionError) as exc:  # json.loads recurses once per nesting level
        warnings.warn(
            f"ignoring damaged kernel tuning cache {path} ({exc}); rerun `edgecnn tune` to rebuild it",
            TuningCacheWarning,
            stacklevel=2,
        )
        return {}


def write_cache(path: Path, machines: Mapping[str, Mapping[str, TunedChoice]]) -> None:
    """Write the whole cache atomically (edgecnn.atomic); a failure is a ConfigurationError naming it."""
    document = {
        "format": FORMAT,
        "machines": {
            fingerprint: {
                "description": machine_description() if fingerprint == machine_fingerprint() else "",
                "entries": {
                    key: {"kernel": c.kernel, "times_ms": dict(c.times_ms)}
                    for key, c in sorted(entries.items())
                },
            }
            for fingerprint, entries in machines.items()
        },
    }
    text = (json.dumps(document, indent=1) + "\n").encode("utf-8")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigurationError(f"cannot write the tuning cache {path}: {exc.strerror or exc}") from None
    atomic_write(path, lambda file: file.write(text), error=ConfigurationError, what="the tuning cache")


def store_choices(choices: Mapping[str, TunedChoice], path: Path | None = None) -> Path:
    """Merge this machine's new choices into the cache file (other machines' sections are kept)."""
    path = path or cache_path()
    machines = {m: dict(e) for m, e in read_cache(path).items()}
    machines.setdefault(machine_fingerprint(), {}).update(choices)
    write_cache(path, machines)
    _loaded.clear()
    return path


_loaded: dict[tuple[str, int, int], dict[str, TunedChoice]] = {}
_loaded_lock = threading.Lock()


def this_machine_choices(path: Path | None = None) -> dict[str, TunedChoice]:
    """This machine's entries, read again only when the file changes (a stat per call)."""
    path = path or cache_path()
    try:
        stat = path.stat()
    except OSError:
        return {}
    state = (str(path), stat.st_mtime_ns, stat.st_size)
    entries = _loaded.get(state)
    if entries is None:
        with _loaded_lock:
            entries = _loaded.get(state)
            if entries is None:
                entries = read_cache(path).get(machine_fingerprint(), {})
                _loaded.clear()
                _loaded[state] = entries
    return entries


_read_once: ContextVar[dict[str, TunedChoice] | None] = ContextVar("edgecnn_tuning_read_once", default=None)


@contextmanager
def choices_read_once() -> Iterator[None]:
    """Inside the block, this machine's choices are those found when it began: a plan looks the
    cache file up once, not once per layer."""
    token = _read_once.set(this_machine_choices())
    try:
        yield
    finally:
        _read_once.reset(token)


def tuned_kernel(
    node: Node,
    input_types: Sequence[TensorType | None],
    input_values: Sequence[np.ndarray | None],
    device_kind: str,
    threads: int,
) -> str | None:
    """The kernel `edgecnn tune` measured fastest for this layer on this machine, if any."""
    choices = _read_once.get()
    if choices is None:
        choices = this_machine_choices()
    if not choices:  # no tuning on this machine: skip the key (it counts every weight's zeros)
        return None
    choice = choices.get(layer_key(node, input_types, input_values, device_kind, threads))
    return None if choice is None else choice.kernel
