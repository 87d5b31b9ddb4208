"""Importers turn model files into Graphs. ``load_graph`` picks one by content and extension."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from edgecnn.errors import ModelFormatError
from edgecnn.ir.graph import Graph
from edgecnn.limits import regular_file_size

GraphLoader = Callable[[Path, "Path | None"], Graph]


def _load_onnx(path: Path, weights: Path | None) -> Graph:
    from edgecnn.importers.onnx import load_onnx

    if weights is not None:
        raise ModelFormatError(f"{path}: ONNX models carry their weights; do not pass weights=")
    return load_onnx(path)


def sniff_format(path: Path) -> str:
    """Name of the format of ``path``, from its first bytes, then its extension."""
    with open(path, "rb") as f:
        head = f.read(64)
    suffix = path.suffix.lower()
    if head.startswith(b"ECNN"):
        return "ecnn"
    if suffix == ".onnx":
        return "onnx"
    if suffix == ".prototxt":
        return "caffe"
    if suffix == ".cfg":
        return "darknet"
    if suffix == ".bin":
        return "radar"
    if suffix == ".tflite" or head[4:8] == b"TFL3":  # FlatBuffers file identifier
        return "tflite"
    from edgecnn.importers.radar import looks_like_radar

    if looks_like_radar(path):  # no magic: the header must parse and predict the exact file size
        return "radar"
    if head[:1] == b"\x08":  # ONNX ModelProto starts with ir_version (field 1, varint)
        return "onnx"
    return "unknown"


def _load_caffe(path: Path, weights: Path | None) -> Graph:
    from edgecnn.importers.caffe import load_caffe

    return load_caffe(path, weights)


def _load_darknet(path: Path, weights: Path | None) -> Graph:
    from edgecnn.importers.darknet import load_darknet

    return load_darknet(path, weights)


def _load_ecnn(path: Path, weights: Path | None) -> Graph:
    from edgecnn.format import load_ecnn

    if weights is not None:
        raise ModelFormatError(f"{path}: .ecnn files carry their weights; do not pass weights=")
    return load_ecnn(path)


def _load_tflite(path: Path, weights: Path | None) -> Graph:
    from edgecnn.importers.tflite import load_tflite

    if weights is not None:
        raise ModelFormatError(f"{path}: .tflite files carry their weights; do not pass weights=")
    return load_tflite(path)


def _load_radar(path: Path, weights: Path | None) -> Graph:
    from edgecnn.importers.radar import load_radar

    if weights is not None:
        raise ModelFormatError(f"{path}: radar .bin files carry their weights; do not pass weights=")
    return load_radar(path)


LOADERS: dict[str, GraphLoader] = {
    "onnx": _load_onnx,
    "caffe": _load_caffe,
    "darknet": _load_darknet,
    "ecnn": _load_ecnn,
    "radar": _load_radar,
    "tflite": _load_tflite,
}


def load_graph(path: str | os.PathLike[str], weights: str | os.PathLike[str] | None = None) -> Graph:
    """Read a model file (and its separate weights, for formats that have them) into a Graph."""
    model_path = Path(path)
    regular_file_size(model_path)  # devices, FIFOs, sockets and directories refused before any read
    weights_path = None if weights is None else Path(weights)
    if weights_path is not None:
        regular_file_size(weights_path, "weights file")
    kind = sniff_format(model_path)
    loader = LOADERS.get(kind)
    if loader is None:
        supported = ", ".join(sorted(LOADERS))
        raise ModelFormatError(
            f"{model_path}: not a model format edgecnn recognises (supported: {supported})"
        )
    return loader(model_path, weights_path)
