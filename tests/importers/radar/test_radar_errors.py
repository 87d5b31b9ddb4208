"""Every damaged-file case ends in ModelFormatError saying what and where (byte offset, layer)."""

from __future__ import annotations

import re
import struct
import tracemalloc
from pathlib import Path

import pytest

from edgecnn.errors import ModelFormatError, ModelNotFoundError
from edgecnn.importers.radar import load_radar


def with_word(data: bytes, index: int, value: int) -> bytes:
    """``data`` with header word ``index`` (0 = layer count; layer i's word j is 1 + 7 i + j) replaced."""
    return data[: 4 * index] + struct.pack("<i", value) + data[4 * index + 4 :]


def load_bytes(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "bad.bin"
    path.write_bytes(data)
    load_radar(path)


def expect_error(tmp_path: Path, data: bytes, pattern: str) -> None:
    with pytest.raises(ModelFormatError, match=pattern):
        load_bytes(tmp_path, data)


@pytest.mark.parametrize(
    ("size", "pattern"),
    [(0, "0 bytes is too short for the layer count word at byte 0"), (3, "3 bytes is too short")],
)
def test_too_short_for_the_count(tmp_path: Path, patent_bytes: bytes, size: int, pattern: str) -> None:
    expect_error(tmp_path, patent_bytes[:size], pattern)


@pytest.mark.parametrize("count", [0, -1, -(2**31), 1025, 2**31 - 1])
def test_layer_count_out_of_range(tmp_path: Path, patent_bytes: bytes, count: int) -> None:
    expect_error(
        tmp_path, with_word(patent_bytes, 0, count), rf"layer count {count} at byte 0 is out of range"
    )


def test_truncated_header(tmp_path: Path, patent_bytes: bytes) -> None:
    expect_error(
        tmp_path, patent_bytes[:40], "truncated header: 4 layers need 116 header bytes, the file has 40"
    )


def test_more_layers_than_the_header_holds(tmp_path: Path, patent_bytes: bytes) -> None:
    # 5 layers: the fifth layer's words are the first floats, read as integers
    with pytest.raises(ModelFormatError, match=r"layer 4: .* at byte 1(1[6-9]|[2-4]\d)"):
        load_bytes(tmp_path, with_word(patent_bytes, 0, 5))


@pytest.mark.parametrize(
    ("word", "value", "pattern"),
    [
        (1, -6, r"layer 0: kernel count -6 at byte 4 is out of range \(0 to 16777216\)"),
        (2, 0, r"layer 0: weight rows 0 at byte 8 is out of range \(1 to"),
        (3, 2**31 - 1, "layer 0: weight columns 2147483647 at byte 12 is out of range"),
        (5, 2**24 + 1, "layer 0: pooling window 16777217 at byte 20 is out of range"),
        (6, 0, "layer 0: pooling stride 0 at byte 24 is out of range"),
        (7, -(2**31), "layer 0: bias count -2147483648 at byte 28 is out of range"),
        (16, 2**30, r"layer 2: weight rows 1073741824 at byte 64 is out of range"),
    ],
)
def test_absurd_dims(tmp_path: Path, patent_bytes: bytes, word: int, value: int, pattern: str) -> None:
    expect_error(tmp_path, with_word(patent_bytes, word, value), pattern)


@pytest.mark.parametrize(
    ("word", "value", "pattern"),
    [
        (4, 3, r"layer 0 \(convolution\): pooling type 3 at byte 16 is not 1 \(average\) or 2 \(max\)"),
        (7, 5, r"layer 0 \(convolution\): bias count 5 at byte 28 differs from the layer's 6 outputs"),
        (9, 7, r"layer 1 \(convolution\): 7 inputs at byte 36 but layer 0 has 6 outputs"),
        (16, 385, r"layer 2 \(fully connected\): 385 inputs at byte 64 is not a multiple of layer 1's 12"),
        (23, 51, r"layer 3 \(fully connected\): 51 inputs at byte 92 but layer 2 has 50 outputs"),
        (18, 2, r"layer 2 \(fully connected\): pooling words \[2, 1, 1\] at byte 72 must be \[1, 1, 1\]"),
        (22, 10, r"layer 3 \(convolution\) at byte 88 follows a fully connected layer"),
        (15, 6, r"layer 2 \(convolution\): bias count 50 at byte 84 differs from the layer's 6 outputs"),
    ],
)
def test_inconsistent_words(tmp_path: Path, patent_bytes: bytes, word: int, value: int, pattern: str) -> None:
    expect_error(tmp_path, with_word(patent_bytes, word, value), pattern)


def test_last_layer_must_be_fully_connected(tmp_path: Path) -> None:
    conv_only = struct.pack("<8i2f", 1, 1, 1, 1, 1, 1, 1, 1, 0.5, 0.0)
    expect_error(tmp_path, conv_only, r"the last layer \(layer 0\) must be fully connected")


def test_no_input_length_reaches_the_dense_inputs(tmp_path: Path, patent_bytes: bytes) -> None:
    # pooling stride 1000: even a 2**24-long input yields fewer than 32 positions
    data = with_word(with_word(patent_bytes, 6, 1000), 13, 1000)
    expect_error(
        tmp_path,
        data,
        r"layer 2 \(fully connected\): no input length up to 16777216 makes the convolutions deliver "
        r"384 values \(12 channels x 32\)",
    )


@pytest.mark.parametrize(
    ("cut", "pattern"),
    [
        (
            116,
            r"truncated: layer 0 \(convolution\) weights \[6, 1, 5\] at byte 116 need 120 bytes, the file ends at byte 116",
        ),
        (240, r"truncated: layer 0 \(convolution\) biases \[6\] at byte 236 need 24 bytes"),
        (1000, r"truncated: layer 1 \(convolution\) weights \[12, 6, 5\] at byte 260"),
        (
            80784,
            r"truncated: layer 3 \(fully connected\) biases \[10\] at byte 80748 need 40 bytes, the file ends at byte 80784",
        ),
    ],
)
def test_truncated_data(tmp_path: Path, patent_bytes: bytes, cut: int, pattern: str) -> None:
    expect_error(tmp_path, patent_bytes[:cut], pattern)


@pytest.mark.parametrize("extra", [b"\0", b"\0\0\0\0", bytes(1000)])
def test_trailing_bytes(tmp_path: Path, patent_bytes: bytes, extra: bytes) -> None:
    expect_error(
        tmp_path,
        patent_bytes + extra,
        rf"{len(extra)} unexpected bytes after the last layer's data \(it ends at byte 80788, "
        rf"the file at byte {80788 + len(extra)}\)",
    )


def test_huge_but_in_range_dims_allocate_nothing(tmp_path: Path) -> None:
    """A one-layer file claiming a 2**24 x 2**24 matrix: refused from the header and the file size."""
    big = 2**24
    data = struct.pack("<8i", 1, 0, big, big, 1, 1, 1, big) + bytes(64)
    tracemalloc.start()
    try:
        with pytest.raises(ModelFormatError, match=re.escape(f"weights [{big}, {big}] at byte 32 need")):
            load_bytes(tmp_path, data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError, match="model file not found"):
        load_radar(tmp_path / "missing.bin")
    with pytest.raises(ModelFormatError, match="is a directory"):
        load_radar(tmp_path)
