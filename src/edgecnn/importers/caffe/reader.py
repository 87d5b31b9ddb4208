"""Reading Caffe files: the text prototxt and the binary caffemodel, into schema messages, and
blobs into numpy arrays (every count checked against the data actually present)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
from google.protobuf import text_format
from google.protobuf.message import DecodeError

from edgecnn.errors import ModelFormatError
from edgecnn.importers.caffe.schema import BlobProto, NetParameter
from edgecnn.importers.darknet.cfg import excerpt
from edgecnn.limits import MemoryBudget, read_file_bounded

MAX_BLOB_ELEMENTS = 1 << 34
"""No Caffe blob legitimately holds more than 16 G elements; larger shapes are damage."""


class CaffeFormatWarning(UserWarning):
    """A prototxt uses fields edgecnn does not read (training settings, other forks' layers)."""


def parse_prototxt(path: Path, budget: MemoryBudget | None = None) -> Any:
    """The NetParameter of a text prototxt (a regular file within ``budget``, default
    :meth:`MemoryBudget.default`). Unknown fields are skipped with a warning."""
    data = read_file_bounded(path, budget or MemoryBudget.default(), "prototxt")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ModelFormatError(f"{path}: not a text prototxt ({exc.reason} at byte {exc.start})") from None
    try:
        return _parse_text(text, path, strict=True)
    except text_format.ParseError as exc:
        strict_error = excerpt(str(exc), 200)
    try:
        net = _parse_text(text, path, strict=False)
    except text_format.ParseError as exc:
        raise ModelFormatError(f"{path}:{excerpt(str(exc), 200)}") from None
    warnings.warn(
        f"{path}:{strict_error} — fields edgecnn does not read are skipped", CaffeFormatWarning, stacklevel=3
    )
    return net


def _parse_text(text: str, path: Path, *, strict: bool) -> Any:
    """protobuf's text parser recurses once per nested message: damage can nest deeper than
    Python's stack allows, and that is a damaged file, not a crash."""
    net = NetParameter()
    try:
        text_format.Parse(text, net, allow_unknown_field=not strict)
    except RecursionError:
        raise ModelFormatError(f"{path}: messages nested too deeply for a Caffe prototxt") from None
    return net


def read_caffemodel(path: Path, budget: MemoryBudget | None = None) -> Any:
    """The NetParameter of a binary caffemodel (layers with their blobs), a regular file within
    ``budget`` (default :meth:`MemoryBudget.default`)."""
    data = read_file_bounded(path, budget or MemoryBudget.default(), "weights file")
    net = NetParameter()
    try:
        net.ParseFromString(data)
    except DecodeError as exc:
        raise ModelFormatError(f"{path}: not a valid caffemodel (protobuf decoding failed: {exc})") from None
    if not net.layer and not net.layers:
        raise ModelFormatError(f"{path}: the caffemodel holds no layers")
    return net


def blob_shape(blob: Any) -> tuple[int, ...]:
    """A blob's shape: the `shape` message, else the legacy num/channels/height/width."""
    if blob.HasField("shape"):
        return tuple(int(d) for d in blob.shape.dim)
    legacy = (blob.num, blob.channels, blob.height, blob.width)
    return tuple(int(d) for d in legacy)


def blob_to_array(blob: Any, where: str) -> np.ndarray:
    """A blob's data as float32 of its declared shape."""
    shape = blob_shape(blob)
    if any(d < 0 for d in shape):
        raise ModelFormatError(f"{where}: negative blob dimension in {excerpt(str(list(shape)))}")
    count = 1
    for d in shape:
        count *= d
    if count > MAX_BLOB_ELEMENTS:
        raise ModelFormatError(f"{where}: blob shape {excerpt(str(list(shape)))} is implausibly large")
    values = blob.data if len(blob.data) else blob.double_data
    if len(values) != count:
        raise ModelFormatError(
            f"{where}: blob of shape {excerpt(str(list(shape)))} needs {count} values, the file has {len(values)}"
        )
    return np.asarray(values, dtype=np.float32).reshape(shape)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


DATA_FIELD_TAG = bytes([5 << 3 | 2])
"""BlobProto.data (field 5) as a length-delimited packed run of little-endian floats."""


def blob_from_array(array: np.ndarray) -> Any:
    """A BlobProto holding ``array`` (float32, with its shape).

    The packed data is assembled as bytes: going through Python floats would take seconds
    for an AlexNet-sized blob."""
    blob = BlobProto()
    blob.shape.dim.extend(int(d) for d in array.shape)
    payload = np.ascontiguousarray(array, dtype="<f4").tobytes()
    blob.MergeFromString(DATA_FIELD_TAG + _varint(len(payload)) + payload)
    return blob
