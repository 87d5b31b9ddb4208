"""Hostile Darknet files end in one ModelFormatError that names file and layer, before allocating.

Peak memory is measured with tracemalloc (numpy and Python objects both report to it), so a refusal
that happens only after a large allocation fails the test even if the allocation succeeded.
"""

from __future__ import annotations

import os
import re
import tracemalloc
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from edgecnn.errors import ModelFormatError
from edgecnn.importers.darknet import DarknetCfgWarning, load_darknet, write_random_weights
from edgecnn.limits import MemoryBudget

HEAD = "[net]\nwidth=8\nheight=8\nchannels=3\n[convolutional]\nfilters=18\nsize=1\nactivation=linear\n"
BUDGET = MemoryBudget(64 << 20)
PEAK_LIMIT = 16 << 20
"""Refusing must cost far less than the budget: the files here are a few hundred bytes."""


@pytest.fixture(autouse=True)
def quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DarknetCfgWarning)
        yield


def refused(cfg: Path, weights: Path | None = None, budget: MemoryBudget = BUDGET) -> str:
    """The ModelFormatError message of loading ``cfg``, checking the peak memory on the way."""
    tracemalloc.start()
    try:
        with pytest.raises(ModelFormatError) as caught:
            load_darknet(cfg, weights, random_seed=None if weights else 0, budget=budget)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < PEAK_LIMIT, f"refusing took {peak} bytes"
    message = str(caught.value)
    assert len(message) < 500
    return message


@pytest.mark.parametrize(
    ("layer", "expected"),
    [
        (
            "[yolo]\nnum=1000000000\nclasses=1\nmask=0,1,2\nanchors=1,2,3,4,5,6\n",
            "1000000000 anchors needs 29.8 GiB",
        ),
        (
            "[yolo]\nnum=100000000\nclasses=1\nmask=0,1,2\n",
            r"layer 1 \[yolo\], option 'num': 100000000 anchors needs",
        ),
        ("[yolo]\nnum=1000000000\nclasses=1\n", "expects 6000000000 input channels"),
        ("[region]\nnum=1000000000\nclasses=1\n", "expects 6000000000 input channels"),
        ("[yolo]\nnum=100000000000000000000\n", r"option 'num': expected an integer in int32's range"),
        (
            "[upsample]\nstride=100000000000000000000\n",
            r"option 'stride': expected an integer in int32's range",
        ),
        ("[upsample]\nstride=1000000000\n", r"layer 1: the output \(18x8000000000x8000000000\) needs"),
        ("[convolutional]\nfilters=1000000000\nsize=1\n", r"layer 1 \[convolutional\] biases needs 3.7 GiB"),
        ("[connected]\noutput=20000\n", r"layer 1 \[connected\] weights needs 87.9 MiB"),
        ("[convolutional]\nsize=1\nfilters=" + "9" * 5000 + "\n", r"got '9{60}\.\.\. \(5000 characters\)'"),
    ],
)
def test_declared_sizes_are_refused_before_allocating(tmp_path: Path, layer: str, expected: str) -> None:
    cfg = tmp_path / "net.cfg"
    cfg.write_text(HEAD + layer)
    message = refused(cfg)
    assert "net.cfg" in message
    assert re.search(expected, message), message


def test_huge_input_is_refused(tmp_path: Path) -> None:
    cfg = tmp_path / "net.cfg"
    cfg.write_text(HEAD.replace("width=8", "width=2000000000"))
    assert "the input (3x8x2000000000) needs" in refused(cfg)


def test_long_values_are_elided_in_messages(tmp_path: Path) -> None:
    cfg = tmp_path / "net.cfg"
    cfg.write_text(HEAD.replace("filters=18", "filters=" + "x" * 100_000))
    message = refused(cfg)
    assert "(100000 characters)" in message


def test_weights_file_over_the_budget_is_refused_unread(tmp_path: Path) -> None:
    cfg = tmp_path / "net.cfg"
    cfg.write_text(HEAD)
    weights = tmp_path / "net.weights"
    write_random_weights(cfg, weights)
    with open(weights, "ab") as f:
        f.truncate(200 << 20)  # sparse: 200 MiB declared, nothing written
    assert "weights file" in refused(cfg, weights)


def test_weights_path_that_is_a_directory(tmp_path: Path) -> None:
    cfg = tmp_path / "net.cfg"
    cfg.write_text(HEAD)
    assert refused(cfg, tmp_path).endswith("is a directory")


def test_cfg_that_is_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "net.cfg"
    os.mkfifo(fifo)
    assert "not a regular file" in refused(fifo)


def test_weights_from_dev_zero_are_refused(tmp_path: Path) -> None:
    cfg = tmp_path / "net.cfg"
    cfg.write_text(HEAD)
    link = tmp_path / "zero.weights"
    link.symlink_to("/dev/zero")
    assert "not a regular file" in refused(cfg, link)


def test_default_budget_still_loads_a_real_network(tmp_path: Path) -> None:
    cfg = tmp_path / "net.cfg"
    cfg.write_text(HEAD + "[yolo]\nnum=3\nclasses=1\nmask=0,1,2\nanchors=1,2,3,4,5,6\n")
    weights = tmp_path / "net.weights"
    write_random_weights(cfg, weights)
    graph = load_darknet(cfg, weights)
    assert graph.outputs == ["layer0.convolutional.conv"]
