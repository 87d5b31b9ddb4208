"""Fixtures of the seed-003 format tests (the helpers themselves live in radar_spec.py)."""

from __future__ import annotations

import pytest

from importers.radar.radar_spec import PATENT_FILE, Layer, patent_network


@pytest.fixture(scope="session")
def patent_layers() -> list[Layer]:
    return patent_network()


@pytest.fixture(scope="session")
def patent_bytes() -> bytes:
    return PATENT_FILE.read_bytes()
