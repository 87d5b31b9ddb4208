"""Shared by the hetero tests: small zoo models written once per session, and a private plan cache."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import onnx
import pytest

from edgecnn.bench.zoo import build_model


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Saved plans go to a fresh directory per test, never the user's cache."""
    root = tmp_path / "cache"
    monkeypatch.setenv("EDGECNN_CACHE_DIR", str(root))
    return root


@pytest.fixture(scope="session")
def zoo_file(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """``zoo_file(name)``: a quarter-width, low-resolution zoo model as an ONNX file."""
    root = tmp_path_factory.mktemp("zoo")
    made: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in made:
            resolution = {"lenet5": 28, "mobilenetv2": 32}.get(name, 64)
            path = root / f"{name}.onnx"
            onnx.save(build_model(name, width=0.25, resolution=resolution), path)
            made[name] = path
        return made[name]

    return get
