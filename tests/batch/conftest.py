"""Inputs for the batch tests: crops of the bundled face/background samples, written per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from batch.support import write_crops


@pytest.fixture(scope="session")
def image_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """40 crops in two subfolders and one file that is not an image."""
    root = tmp_path_factory.mktemp("batch-images")
    write_crops(root / "a", 24, seed=1)
    write_crops(root / "b" / "deeper", 16, seed=2)
    (root / "a" / "broken.jpg").write_bytes(b"not a jpeg at all")
    return root
