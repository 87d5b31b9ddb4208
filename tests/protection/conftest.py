"""Keys and a small saved model for the protection tests (the .ecnn helpers of tests/format are importable)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "format"))

from ecnn_helpers import small_cnn

from edgecnn.format.keys import generate_model_key, generate_signing_key
from edgecnn.ir.graph import Graph


@pytest.fixture
def graph() -> Graph:
    return small_cnn()


@pytest.fixture
def model_key() -> bytes:
    return generate_model_key()


@pytest.fixture(scope="session")
def signing_pair() -> tuple[bytes, bytes]:
    """(private PEM, public PEM)."""
    return generate_signing_key()
