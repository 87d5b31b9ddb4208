"""Darknet importer: a ``.cfg`` network description plus its ``.weights`` file -> Graph.

The graph takes one float32 input ``input`` of shape (batch, channels, height, width) — RGB in
[0, 1], as Darknet feeds images — and outputs the raw tensors that feed each detection layer
(``[yolo]``, ``[region]``, ``[detection]``), or the last layer's output for networks without one.
Each detection output has a decoder description in ``Graph.metadata`` (see
:func:`edgecnn.detection.yolo.decoders_from_metadata`). Batch normalisation stays as
BatchNormalization nodes; a later pass folds them into the convolutions.

``weights=None`` is an error: a network with made-up weights gives made-up answers. Tests and
benchmarks that want one anyway pass ``random_seed=N`` to :func:`load_darknet` (seeded random
weights), or write a weights file with :func:`write_random_weights`.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from edgecnn.detection.yolo import METADATA_PREFIX
from edgecnn.errors import ModelFormatError
from edgecnn.importers.darknet.cfg import DarknetCfgWarning, Section, parse_cfg
from edgecnn.importers.darknet.layers import CONVERTERS, FLOAT_BYTES, LayerContext, LayerOutput
from edgecnn.importers.darknet.weights import (
    FileWeights,
    ParamKind,
    RandomWeights,
    WeightsHeader,
    WeightSource,
    write_weights,
)
from edgecnn.ir.graph import Graph, TensorSpec
from edgecnn.limits import MemoryBudget, Tally, read_file_bounded

__all__ = [
    "DarknetCfgWarning",
    "FileWeights",
    "ParamKind",
    "RandomWeights",
    "WeightsHeader",
    "build_graph",
    "load_darknet",
    "parse_cfg",
    "read_cfg",
    "write_random_weights",
    "write_weights",
]

INPUT_NAME = "input"


def check_output(budget: MemoryBudget, what: str, shape: tuple[int, int, int]) -> None:
    """One image's float32 tensor of ``shape`` must fit ``budget`` (the planner adds them up)."""
    budget.check(FLOAT_BYTES * math.prod(shape), f"{what} ({'x'.join(map(str, shape))})", ModelFormatError)


QUIET_SECTIONS = frozenset({"yolo", "region", "detection", "cost", "dropout"})
"""Sections full of training-only options: their unknown keys are not warned about."""


def read_cfg(path: Path, budget: MemoryBudget | None = None) -> list[Section]:
    """The sections of the cfg file at ``path`` (a regular file no larger than ``budget``)."""
    data = read_file_bounded(path, budget or MemoryBudget.default(), "cfg file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ModelFormatError(f"{path}: not a text file ({exc.reason} at byte {exc.start})") from None
    return parse_cfg(text, str(path))


def build_graph(
    sections: list[Section],
    weights: WeightSource,
    input_size: tuple[int, int] | None = None,
    name: str = "darknet",
    tally: Tally | None = None,
) -> Graph:
    """Convert parsed sections, taking parameters from ``weights`` in Darknet's order.

    ``input_size`` (width, height) overrides the cfg's, as Darknet's resize does. Every layer's
    parameters are added to ``tally`` (default: a fresh one of :meth:`MemoryBudget.default`) before
    they are read, and each layer's output for one image must fit its budget, so a cfg cannot
    declare gigabytes.
    """
    tally = tally or MemoryBudget.default().tally(name, ModelFormatError)
    budget = tally.budget
    net = sections[0]
    width, height = input_size or (net.get_int("width", 0), net.get_int("height", 0))
    channels = net.get_int("channels", 0)
    if width < 1 or height < 1 or channels < 1:
        raise ModelFormatError(
            f"{net.where()}: width, height and channels must be positive, got {width}, {height}, {channels}"
        )
    if len(sections) < 2:
        raise ModelFormatError(f"{net.where()}: the network has no layers")
    previous = LayerOutput(INPUT_NAME, (channels, height, width))
    check_output(budget, f"{net.where()}: the input", previous.shape)
    layers: list[LayerOutput] = []
    graph = Graph([TensorSpec(INPUT_NAME, "float32", ("batch", channels, height, width))], [], [], name=name)
    for index, section in enumerate(sections[1:]):
        convert = CONVERTERS.get(section.kind)
        if convert is None:
            known = ", ".join(sorted(CONVERTERS))
            raise ModelFormatError(
                f"{section.where()}: layer {index}: unsupported Darknet layer type {section.label()} (supported: {known})"
            )
        ctx = LayerContext(index, section, layers, previous, weights, (width, height), tally)
        previous = convert(ctx)
        check_output(budget, f"{section.where()}: layer {index}: the output", previous.shape)
        if section.kind not in QUIET_SECTIONS:
            section.warn_unused()
        graph.nodes.extend(ctx.nodes)
        graph.initializers.update(ctx.initializers)
        layers.append(previous)
    detections = [layer for layer in layers if layer.detection]
    for layer in detections:
        graph.metadata[METADATA_PREFIX + layer.tensor] = layer.detection
    graph.outputs = [layer.tensor for layer in detections] or [layers[-1].tensor]
    return graph


def load_darknet(
    path: Path,
    weights: Path | None = None,
    *,
    random_seed: int | None = None,
    input_size: tuple[int, int] | None = None,
    budget: MemoryBudget | None = None,
) -> Graph:
    """Read a Darknet cfg and its weights file; see the module docstring for ``random_seed``.

    ``budget`` bounds the files read and what the layers declare (default: most of the memory
    available now)."""
    path = Path(path)
    budget = budget or MemoryBudget.default()
    sections = read_cfg(path, budget)
    source: FileWeights | RandomWeights
    if weights is not None:
        source = FileWeights.from_path(Path(weights), budget)
    elif random_seed is not None:
        source = RandomWeights(random_seed)
    else:
        raise ModelFormatError(
            f"{path}: a Darknet cfg has no weights; pass weights='<name>.weights' "
            f"(tests and benchmarks may call load_darknet(..., random_seed=N) for random weights)"
        )
    tally = budget.tally(str(path), ModelFormatError)
    if isinstance(source, FileWeights):
        tally.add(source.size, "the weights file")
    graph = build_graph(sections, source, input_size, name=path.stem, tally=tally)
    if isinstance(source, FileWeights):
        source.finish()
    return graph


def write_random_weights(
    cfg: str | os.PathLike[str],
    weights: str | os.PathLike[str],
    seed: int = 0,
    input_size: tuple[int, int] | None = None,
) -> None:
    """Write a ``.weights`` file of seeded random parameters that fits ``cfg``."""
    source = RandomWeights(seed)
    build_graph(read_cfg(Path(cfg)), source, input_size)
    write_weights(weights, (block for _, _, block in source.blocks))
