"""Damaged weights and cfg text: loading either works or raises ModelFormatError, nothing else."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import edgecnn
from edgecnn.errors import ModelFormatError
from edgecnn.importers.darknet import DarknetCfgWarning, load_darknet, write_random_weights

BASE_CFG = """[net]
width=8
height=8
channels=3

[convolutional]
filters=4
size=3
stride=1
pad=1
batch_normalize=1
activation=leaky

[maxpool]
size=2
stride=2

[convolutional]
filters=4
size=3
pad=1
activation=mish

[shortcut]
from=-2

[upsample]
stride=2

[route]
layers=-1,0

[reorg]
stride=2

[convolutional]
filters=18
size=1
activation=linear

[yolo]
mask=0,1,2
anchors=1,2,3,4,5,6
classes=1
num=3

[route]
layers=-3

[connected]
output=12
batch_normalize=1
activation=linear

[detection]
side=1
num=2
classes=2
coords=4
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes, Path]:
    folder = tmp_path_factory.mktemp("fuzz")
    cfg = folder / "base.cfg"
    cfg.write_text(BASE_CFG)
    weights = folder / "base.weights"
    write_random_weights(cfg, weights, seed=7)
    return cfg, weights.read_bytes(), folder


def load_or_format_error(cfg: Path, weights: Path, run: bool) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DarknetCfgWarning)
        warnings.simplefilter("ignore", RuntimeWarning)  # garbled floats overflow
        try:
            graph = load_darknet(cfg, weights)
        except ModelFormatError:
            return
        model = edgecnn.Model(graph)
        if run:
            model.run(np.ones((1, *model.inputs[0].shape[1:]), np.float32))


def test_base_network_loads(files: tuple[Path, bytes, Path]) -> None:
    cfg, data, folder = files
    (folder / "ok.weights").write_bytes(data)
    model = edgecnn.load(cfg, folder / "ok.weights")
    assert [spec.shape[1:] for spec in model.outputs] == [(18, 4, 4), (12,)]


weight_damage = st.one_of(
    st.tuples(st.just("truncate"), st.integers(0, 2000), st.binary(max_size=0)),
    st.tuples(st.just("extend"), st.integers(0, 0), st.binary(min_size=1, max_size=64)),
    st.tuples(st.just("overwrite"), st.integers(0, 2000), st.binary(min_size=1, max_size=16)),
)


@settings(max_examples=100, deadline=None)
@given(weight_damage)
def test_damaged_weights(files: tuple[Path, bytes, Path], damage: tuple[str, int, bytes]) -> None:
    cfg, data, folder = files
    kind, position, payload = damage
    position = min(position, len(data))
    if kind == "truncate":
        damaged = data[:position]
    elif kind == "extend":
        damaged = data + payload
    else:
        damaged = data[:position] + payload + data[position + len(payload) :]
    path = folder / "damaged.weights"
    path.write_bytes(damaged)
    load_or_format_error(cfg, path, run=True)


LINES = BASE_CFG.splitlines()
junk = st.text(alphabet="0123456789-,.=[]#;abcyolorute \t", max_size=12)
cfg_damage = st.lists(
    st.one_of(
        st.tuples(st.just("delete"), st.integers(0, len(LINES) - 1), junk),
        st.tuples(st.just("duplicate"), st.integers(0, len(LINES) - 1), junk),
        st.tuples(st.just("replace"), st.integers(0, len(LINES) - 1), junk),
        st.tuples(st.just("append"), st.integers(0, len(LINES) - 1), junk),
    ),
    min_size=1,
    max_size=3,
)


@settings(max_examples=100, deadline=None)
@given(cfg_damage)
def test_damaged_cfg(files: tuple[Path, bytes, Path], edits: list[tuple[str, int, str]]) -> None:
    _, data, folder = files
    lines = list(LINES)
    for kind, index, text in edits:
        index = min(index, len(lines) - 1)
        if kind == "delete" and len(lines) > 1:
            del lines[index]
        elif kind == "duplicate":
            lines.insert(index, lines[index])
        elif kind == "replace":
            lines[index] = text
        else:
            lines[index] += text
    cfg, weights = folder / "damaged.cfg", folder / "base.weights"
    cfg.write_text("\n".join(lines))
    weights.write_bytes(data)
    load_or_format_error(cfg, weights, run=False)
