"""Atomic, tidy writes of .ecnn and radar files, and the default CRC check of the weights."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from ecnn_helpers import small_cnn

from edgecnn import atomic
from edgecnn.errors import ModelFormatError
from edgecnn.format import EcnnChecksumError, load_ecnn, reader, save_ecnn
from edgecnn.importers.radar import load_radar, save_radar
from edgecnn.ir.graph import Graph

RADAR_FILE = Path(__file__).parents[1] / "importers" / "radar" / "data" / "patent_aircraft.bin"


def _dead_pid() -> int:
    """The pid of a process that has exited."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_stale_temporaries_of_the_target_are_removed(tmp_path: Path, cnn_graph: Graph) -> None:
    target = tmp_path / "m.ecnn"
    dead = tmp_path / f".m.ecnn.{_dead_pid()}.abc123.tmp"  # a save killed half-way
    live = tmp_path / f".m.ecnn.{os.getppid()}.def456.tmp"  # a save running in another process
    old_style = tmp_path / ".m.ecnn.x9y8z7.tmp"  # an older writer's name, long abandoned
    recent_old_style = tmp_path / ".m.ecnn.q1w2e3.tmp"
    other_target = tmp_path / f".n.ecnn.{_dead_pid()}.abc.tmp"
    for path in (dead, live, old_style, recent_old_style, other_target):
        path.write_bytes(b"partial")
    long_ago = time.time() - 2 * atomic.UNOWNED_TEMPORARY_AGE_S
    os.utime(old_style, (long_ago, long_ago))
    save_ecnn(cnn_graph, target)
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted(["m.ecnn", live.name, recent_old_style.name, other_target.name])


def _failing_fsync(fd: int) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_failed_save_keeps_the_old_file_and_names_the_target(
    tmp_path: Path, cnn_graph: Graph, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "m.ecnn"
    save_ecnn(cnn_graph, target)
    before = target.read_bytes()
    monkeypatch.setattr(atomic.os, "fsync", _failing_fsync)
    with pytest.raises(ModelFormatError) as caught:
        save_ecnn(small_cnn(seed=1), target)
    message = str(caught.value)
    assert str(target) in message and "No space left" in message and ".tmp" not in message
    assert target.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["m.ecnn"]


def test_radar_writer_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    graph = load_radar(RADAR_FILE)
    target = tmp_path / "radar.bin"
    save_radar(graph, target)
    before = target.read_bytes()
    assert before == RADAR_FILE.read_bytes()
    monkeypatch.setattr(atomic.os, "fsync", _failing_fsync)
    with pytest.raises(ModelFormatError, match=r"cannot write radar model file .*radar\.bin: No space left"):
        save_radar(graph, target)
    assert target.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["radar.bin"]


def test_writing_over_a_directory_is_refused(tmp_path: Path, cnn_graph: Graph) -> None:
    (tmp_path / "d.ecnn").mkdir()
    with pytest.raises(ModelFormatError, match="is a directory"):
        save_ecnn(cnn_graph, tmp_path / "d.ecnn")


def test_default_load_checks_the_weights_crc(
    tmp_path: Path, cnn_graph: Graph, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "m.ecnn"
    save_ecnn(cnn_graph, path)
    raw = bytearray(path.read_bytes())
    fc_w = np.array(load_ecnn(path).initializers["fc.w"])  # a copy: the file is rewritten in place
    position = raw.find(np.ascontiguousarray(fc_w).tobytes()[:32])
    raw[position + 5] ^= 0x40  # one flipped bit in a weight
    path.write_bytes(bytes(raw))
    with pytest.raises(EcnnChecksumError, match=r"tensor 'fc\.w' CRC-32 mismatch"):
        load_ecnn(path)
    assert not np.array_equal(load_ecnn(path, verify=False).initializers["fc.w"], fc_w)
    monkeypatch.setattr(reader, "DEFAULT_VERIFY_MAX_BYTES", len(raw) - 1)
    assert isinstance(load_ecnn(path), Graph)  # above the size, load maps without reading


def test_damage_in_data_padding_is_named_as_the_data_section(tmp_path: Path, cnn_graph: Graph) -> None:
    path = tmp_path / "m.ecnn"
    save_ecnn(cnn_graph, path)
    graph = load_ecnn(path)
    raw = bytearray(path.read_bytes())
    first = np.ascontiguousarray(graph.initializers["conv.w"]).tobytes()
    end = raw.find(first) + len(first)  # conv.w is 432 bytes: padding follows it up to 448
    raw[end + 3] ^= 0x01
    path.write_bytes(bytes(raw))
    with pytest.raises(EcnnChecksumError, match="DATA section CRC"):
        load_ecnn(path)
