"""Mutated patent files: load_radar succeeds (and the graph runs) or raises ModelFormatError."""

from __future__ import annotations

import struct
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgecnn.errors import ModelFormatError
from edgecnn.importers.radar import load_radar
from edgecnn.model import Model
from importers.radar.radar_spec import PATENT_FILE

PATENT = PATENT_FILE.read_bytes()
HEADER_WORDS = 29
MAX_RUN_LENGTH = 4096
"""Run the graphs whose input is at most this long (a mutated stride can ask for millions)."""

interesting_ints = st.one_of(
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-2, 400),
    st.sampled_from([2**24, 2**24 + 1, 2**30, 2**31 - 1, -(2**31)]),
)
mutation = st.one_of(
    st.tuples(st.just("truncate"), st.integers(0, len(PATENT)), st.just(0)),
    st.tuples(st.just("flip"), st.integers(0, len(PATENT) - 1), st.integers(1, 255)),
    st.tuples(st.just("flip_header"), st.integers(0, 4 * HEADER_WORDS - 1), st.integers(1, 255)),
    st.tuples(st.just("word"), st.integers(0, HEADER_WORDS - 1), interesting_ints),
    st.tuples(st.just("append"), st.integers(1, 64), st.just(0)),
)


def mutate(data: bytes, kind: str, position: int, value: int) -> bytes:
    if kind == "truncate":
        return data[:position]
    if kind in ("flip", "flip_header"):
        return data[:position] + bytes([data[position] ^ value]) + data[position + 1 :]
    if kind == "word":
        return data[: 4 * position] + struct.pack("<i", value) + data[4 * position + 4 :]
    return data + bytes(range(position))


def load_or_format_error(path: Path) -> None:
    try:
        graph = load_radar(path)
    except ModelFormatError:
        return
    model = Model(graph)
    length = graph.inputs[0].shape[2]
    if length <= MAX_RUN_LENGTH:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # flipped float bits make inf/nan
            probs = model.run({"input": np.ones((1, *graph.inputs[0].shape[1:]), np.float32)})
        assert next(iter(probs.values())).shape[0] == 1


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(mutation, min_size=1, max_size=3))
def test_mutated_files_load_or_raise_format_errors(tmp_path: Path, edits: list[tuple[str, int, int]]) -> None:
    data = PATENT
    for kind, position, value in edits:
        if kind in ("flip", "flip_header", "truncate") and position >= len(data):
            position = max(len(data) - 1, 0)
        if kind in ("flip", "flip_header") and not data:
            continue
        data = mutate(data, kind, position, value)
    path = tmp_path / "mutated.bin"
    path.write_bytes(data)
    load_or_format_error(path)


@pytest.mark.parametrize("word", range(HEADER_WORDS))
def test_every_header_word_set_to_extremes(tmp_path: Path, word: int) -> None:
    for value in (-(2**31), -1, 0, 1, 2, 7, 2**24, 2**31 - 1):
        path = tmp_path / f"w{word}_{value}.bin"
        path.write_bytes(mutate(PATENT, "word", word, value))
        load_or_format_error(path)
