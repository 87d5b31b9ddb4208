"""The memory budget's arithmetic and messages."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from edgecnn.errors import GraphError, ModelFormatError, ModelNotFoundError
from edgecnn.limits import (
    MIN_DEFAULT_LIMIT,
    MemoryBudget,
    available_memory,
    default_memory_limit,
    format_bytes,
    read_file_bounded,
    regular_file_size,
)


def test_default_limit_is_a_share_of_available_memory() -> None:
    assert available_memory() > 0
    assert MIN_DEFAULT_LIMIT <= default_memory_limit() <= max(MIN_DEFAULT_LIMIT, available_memory())


def test_check_refuses_one_size_over_the_limit() -> None:
    budget = MemoryBudget(1 << 20)
    budget.check(1 << 20, "tensor w", ModelFormatError)
    with pytest.raises(ModelFormatError, match=r"tensor w needs 1\.0 MiB, over the memory limit of 1\.0 MiB"):
        budget.check((1 << 20) + 1024, "tensor w", ModelFormatError)


def test_tally_refuses_the_item_that_passes_the_total() -> None:
    tally = MemoryBudget(1000).tally("model.ecnn", GraphError)
    tally.add(600, "a")
    with pytest.raises(GraphError, match=r"model\.ecnn: b needs 500 B, which takes the total to 1\.1 KiB"):
        tally.add(500, "b")
    assert tally.total == 600
    with pytest.raises(GraphError, match="negative"):
        tally.add(-1, "c")


def test_format_bytes_units() -> None:
    assert format_bytes(512) == "512 B"
    assert format_bytes(3 << 30) == "3.0 GiB"
    assert format_bytes(10**18).endswith("PiB")
    assert format_bytes(10**400).endswith("PiB")  # past a float


def test_regular_file_checks(tmp_path: Path) -> None:
    model = tmp_path / "m.bin"
    model.write_bytes(b"x" * 100)
    assert regular_file_size(model) == 100
    assert read_file_bounded(model, MemoryBudget(100)) == b"x" * 100
    with pytest.raises(ModelFormatError, match="over the memory limit"):
        read_file_bounded(model, MemoryBudget(99))
    with pytest.raises(ModelNotFoundError, match="weights file not found"):
        regular_file_size(tmp_path / "missing", "weights file")
    with pytest.raises(ModelFormatError, match="is a directory"):
        regular_file_size(tmp_path)
    with pytest.raises(ModelFormatError, match="not a regular file"):
        regular_file_size("/dev/zero")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ModelFormatError, match="not a regular file"):
        read_file_bounded(fifo, MemoryBudget(1 << 20))
