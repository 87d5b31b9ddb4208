"""edgecnn.paths.cache_dir: $EDGECNN_CACHE_DIR, else $XDG_CACHE_HOME/edgecnn, else ~/.cache/edgecnn."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgecnn.paths import CACHE_ENV, cache_dir


def test_order_of_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "x"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "x"
    assert cache_dir("plans", "a.json") == tmp_path / "x" / "plans" / "a.json"
    monkeypatch.setenv(CACHE_ENV, "  ")  # blank counts as unset
    assert cache_dir("bench") == tmp_path / "xdg" / "edgecnn" / "bench"
    monkeypatch.delenv(CACHE_ENV)
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_dir() == Path.home() / ".cache" / "edgecnn"


def test_home_is_expanded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, "~/edgecnn-cache")
    assert cache_dir() == Path.home() / "edgecnn-cache"
