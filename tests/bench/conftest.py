"""Shared fixtures: one cache directory of small zoo models for the whole bench test session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from edgecnn.bench.peers import QUIET_POOLS


@pytest.fixture(scope="session")
def zoo_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("zoo")


@pytest.fixture(autouse=True)
def _restore_thread_pool_environment() -> Iterator[None]:
    """`edgecnn bench` sets OMP_WAIT_POLICY for its process; keep it from leaking into other tests."""
    saved = {key: os.environ.get(key) for key in QUIET_POOLS}
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
