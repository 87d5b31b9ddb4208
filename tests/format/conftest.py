"""Makes ecnn_helpers importable from the tests in this folder, and provides the small CNN."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from ecnn_helpers import small_cnn

from edgecnn.ir.graph import Graph


@pytest.fixture
def cnn_graph() -> Graph:
    return small_cnn()
