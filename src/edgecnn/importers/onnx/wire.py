"""A direct reader of ONNX files for the common case: the protobuf wire format decoded in Python,
tensors copied once from the file into numpy arrays, and no onnx import.

Why: through the onnx package, a 100 MB ResNet-50 is copied three times (the file into a bytes
object, that into protobuf's messages, each tensor's raw_data out again) after a tenth of a second
spent importing onnx; that was a third of the first inference's time in a fresh process (issue 4).

Only what edgecnn's importer uses is decoded (field numbers from onnx.proto). Anything this reader
does not handle exactly as the onnx package would — external or sparse weights, subgraphs, function
attributes, typed tensor fields other than float/int32/int64/double/uint64, non-tensor types,
invalid UTF-8, a field that protobuf would merge, a malformed file — raises ``NotFastPath``, and the
caller reads the file through the onnx package instead, which also produces the error messages for
damaged files."""

from __future__ import annotations

import math
import mmap
import os
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from edgecnn.importers.onnx.dtypes import ELEMENT_TYPES
from edgecnn.ir.graph import Dim, TensorType
from edgecnn.ops.common import MAX_RANK


class NotFastPath(Exception):
    """This file needs the onnx package's reader (or is damaged and needs its error message)."""


@dataclass
class WireNode:
    op_type: str = ""
    domain: str = ""
    name: str = ""
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    attributes: dict[str, Any] = field(default_factory=dict)  # decoded like reader.decode_attribute


@dataclass
class WireModel:
    """The parts of a ModelProto the importer uses, decoded."""

    producer_name: str = ""
    opset_import: dict[str, int] = field(default_factory=dict)  # domain -> version (last one wins)
    metadata: dict[str, str] = field(default_factory=dict)
    graph_name: str = ""
    nodes: list[WireNode] = field(default_factory=list)
    initializers: list[tuple[str, np.ndarray]] = field(default_factory=list)
    inputs: list[tuple[str, TensorType | None]] = field(default_factory=list)
    outputs: list[tuple[str, TensorType | None]] = field(default_factory=list)


VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5

# AttributeProto.AttributeType
FLOAT, INT, STRING, TENSOR, FLOATS, INTS, STRINGS, TENSORS = 1, 2, 3, 4, 6, 7, 8, 9

MAX_TENSOR_BYTES = sys.maxsize
"""Largest tensor numpy can shape (its dims' product with zeros counted as ones, times the item size)."""

_TYPED_FIELDS = {1: (4, "<f4"), 6: (5, None), 7: (7, None), 11: (10, "<f8"), 13: (11, None)}
"""Element type -> (TensorProto field holding its values when raw_data is absent, packed layout)."""


def read_model(path: Path) -> WireModel:
    """Decode ``path``; raises NotFastPath for anything the onnx package must read instead."""
    if sys.byteorder != "little":
        raise NotFastPath("big-endian host")
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            raise NotFastPath("empty file")
        try:
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as exc:  # not a regular file
            raise NotFastPath(str(exc)) from None
    buffer = memoryview(mapped)
    try:
        return _Reader(buffer).model(0, len(buffer))
    finally:
        try:  # every array was copied out, so nothing refers to the mapping any more...
            buffer.release()
            mapped.close()
        except BufferError:  # ...unless a traceback holds one: then it closes when collected
            pass


class _Reader:
    def __init__(self, buffer: memoryview) -> None:
        self.buf = buffer

    # ------------------------------------------------------------------ wire format
    def varint(self, pos: int, end: int) -> tuple[int, int]:
        buf = self.buf
        result = shift = 0
        while True:
            if pos >= end or shift > 63:
                raise NotFastPath("truncated or overlong varint")
            byte = buf[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                return result, pos
            shift += 7

    def fields(self, pos: int, end: int) -> list[tuple[int, int, int, int]]:
        """Every field of the message in [pos, end): (number, wire type, value or start, end)."""
        out = []
        while pos < end:
            key, pos = self.varint(pos, end)
            number, wire = key >> 3, key & 7
            if number == 0:
                raise NotFastPath("field number 0")
            if wire == VARINT:
                value, pos = self.varint(pos, end)
                out.append((number, wire, value, pos))
            elif wire == LENGTH:
                length, pos = self.varint(pos, end)
                if pos + length > end:
                    raise NotFastPath("length past the end of its message")
                out.append((number, wire, pos, pos + length))
                pos += length
            elif wire in (FIXED32, FIXED64):
                size = 4 if wire == FIXED32 else 8
                if pos + size > end:
                    raise NotFastPath("truncated fixed-size field")
                out.append((number, wire, pos, pos + size))
                pos += size
            else:
                raise NotFastPath(f"wire type {wire}")
        if pos != end:
            raise NotFastPath("message overruns its length")
        return out

    def text(self, start: int, end: int) -> str:
        try:
            return bytes(self.buf[start:end]).decode("utf-8")
        except UnicodeDecodeError:
            raise NotFastPath("invalid UTF-8") from None

    @staticmethod
    def expect(wire: int, wanted: int) -> None:
        if wire != wanted:
            raise NotFastPath("unexpected wire type")

    def packed_ints(self, wire: int, a: int, b: int, out: list[int], signed: bool = True) -> None:
        """A repeated integer field's occurrence: one varint, or a packed run of them."""
        if wire == VARINT:
            out.append(_signed(a) if signed else a)
            return
        self.expect(wire, LENGTH)
        pos = a
        while pos < b:
            value, pos = self.varint(pos, b)
            out.append(_signed(value) if signed else value)

    def packed_fixed(self, wire: int, a: int, b: int, fmt: str, size: int, out: list[float]) -> None:
        if wire == (FIXED32 if size == 4 else FIXED64):
            out.append(struct.unpack_from(fmt, self.buf, a)[0])
            return
        self.expect(wire, LENGTH)
        if (b - a) % size:
            raise NotFastPath("packed field of a partial element")
        out.extend(struct.unpack_from(f"<{(b - a) // size}{fmt[-1]}", self.buf, a))

    # ------------------------------------------------------------------ messages
    def model(self, start: int, end: int) -> WireModel:
        model = WireModel()
        graphs = 0
        for number, wire, a, b in self.fields(start, end):
            if number == 2:
                self.expect(wire, LENGTH)
                model.producer_name = self.text(a, b)
            elif number == 7:
                self.expect(wire, LENGTH)
                graphs += 1
                if graphs > 1:
                    raise NotFastPath("graph field repeated (protobuf merges them)")
                self.graph(a, b, model)
            elif number == 8:
                self.expect(wire, LENGTH)
                domain, version = "", 0
                for n2, w2, a2, b2 in self.fields(a, b):
                    if n2 == 1:
                        self.expect(w2, LENGTH)
                        domain = self.text(a2, b2)
                    elif n2 == 2:
                        self.expect(w2, VARINT)
                        version = _signed(a2)
                model.opset_import[domain] = version
            elif number == 14:
                self.expect(wire, LENGTH)
                entry = {1: "", 2: ""}
                for n2, w2, a2, b2 in self.fields(a, b):
                    if n2 in entry:
                        self.expect(w2, LENGTH)
                        entry[n2] = self.text(a2, b2)
                model.metadata[entry[1]] = entry[2]
        if graphs == 0 or (not model.nodes and not model.outputs):
            raise NotFastPath("no graph")
        return model

    def graph(self, start: int, end: int, model: WireModel) -> None:
        for number, wire, a, b in self.fields(start, end):
            if number in (1, 2, 5, 11, 12):
                self.expect(wire, LENGTH)
            if number == 1:
                model.nodes.append(self.node(a, b))
            elif number == 2:
                model.graph_name = self.text(a, b)
            elif number == 5:
                model.initializers.append(self.tensor(a, b))
            elif number == 11:
                model.inputs.append(self.value_info(a, b))
            elif number == 12:
                model.outputs.append(self.value_info(a, b))
            elif number == 15:
                raise NotFastPath("sparse initializer")

    def node(self, start: int, end: int) -> WireNode:
        node = WireNode()
        for number, wire, a, b in self.fields(start, end):
            if number in (1, 2, 3, 4, 5, 7):
                self.expect(wire, LENGTH)
            if number == 1:
                node.inputs.append(self.text(a, b))
            elif number == 2:
                node.outputs.append(self.text(a, b))
            elif number == 3:
                node.name = self.text(a, b)
            elif number == 4:
                node.op_type = self.text(a, b)
            elif number == 5:
                name, value = self.attribute(a, b)
                node.attributes[name] = value
            elif number == 7:
                node.domain = self.text(a, b)
        return node

    def attribute(self, start: int, end: int) -> tuple[str, Any]:
        name, kind = "", 0
        f, i, s, t = 0.0, 0, "", None
        floats: list[float] = []
        ints: list[int] = []
        strings: list[str] = []
        tensors: list[np.ndarray] = []
        for number, wire, a, b in self.fields(start, end):
            if number == 1:
                self.expect(wire, LENGTH)
                name = self.text(a, b)
            elif number == 2:
                self.expect(wire, FIXED32)
                f = struct.unpack_from("<f", self.buf, a)[0]
            elif number == 3:
                self.expect(wire, VARINT)
                i = _signed(a)
            elif number == 4:
                self.expect(wire, LENGTH)
                s = bytes(self.buf[a:b]).decode("utf-8", errors="replace")
            elif number == 5:
                self.expect(wire, LENGTH)
                if t is not None:
                    raise NotFastPath("tensor attribute repeated (protobuf merges them)")
                t = self.tensor(a, b)[1]
            elif number == 7:
                self.packed_fixed(wire, a, b, "<f", 4, floats)
            elif number == 8:
                self.packed_ints(wire, a, b, ints)
            elif number == 9:
                self.expect(wire, LENGTH)
                strings.append(bytes(self.buf[a:b]).decode("utf-8", errors="replace"))
            elif number == 10:
                self.expect(wire, LENGTH)
                tensors.append(self.tensor(a, b)[1])
            elif number == 20:
                self.expect(wire, VARINT)
                kind = a
            elif number in (6, 11, 14, 15, 21, 22, 23):
                raise NotFastPath("graph, type, sparse or reference attribute")
        values = {FLOAT: f, INT: i, STRING: s, TENSOR: t, FLOATS: floats, INTS: ints, STRINGS: strings}
        values[TENSORS] = tensors
        if kind not in values or (kind == TENSOR and t is None):
            raise NotFastPath(f"attribute type {kind}")
        return name, values[kind]

    def tensor(self, start: int, end: int) -> tuple[str, np.ndarray]:
        name, elem_type = "", 0
        dims: list[int] = []
        raw: tuple[int, int] | None = None
        typed: dict[int, list[Any]] = {}
        for number, wire, a, b in self.fields(start, end):
            if number == 1:
                self.packed_ints(wire, a, b, dims)
            elif number == 2:
                self.expect(wire, VARINT)
                elem_type = a
            elif number == 8:
                self.expect(wire, LENGTH)
                name = self.text(a, b)
            elif number == 9:
                self.expect(wire, LENGTH)
                raw = (a, b)
            elif number in (4, 10):
                fmt, size = ("<f", 4) if number == 4 else ("<d", 8)
                self.packed_fixed(wire, a, b, fmt, size, typed.setdefault(number, []))
            elif number in (5, 7, 11):
                self.packed_ints(wire, a, b, typed.setdefault(number, []), signed=number != 11)
            elif number in (3, 6, 13) or (number == 14 and a != 0):
                raise NotFastPath("segmented, string or external tensor")
        dtype = ELEMENT_TYPES.get(elem_type)
        if dtype is None or any(d < 0 for d in dims) or len(dims) > MAX_RANK:
            raise NotFastPath("unsupported element type, negative dimension or too many dimensions")
        if math.prod(max(d, 1) for d in dims) * np.dtype(dtype).itemsize > MAX_TENSOR_BYTES:
            # numpy refuses such shapes even with a zero among them (a damaged dims field)
            raise NotFastPath("dimensions beyond what numpy can shape")
        count = math.prod(dims)  # exact: np.prod would wrap around on damaged dims
        if raw is not None:
            a, b = raw
            itemsize = np.dtype(dtype).itemsize
            if b - a != count * itemsize:
                raise NotFastPath("raw_data size does not match the dimensions")
            # a copy (little-endian host), since the mapping is closed after reading; read-only, as the
            # onnx package's arrays over raw_data are
            array = np.frombuffer(self.buf, dtype=dtype, count=count, offset=a).reshape(dims).copy()
            array.flags.writeable = False
            return name, array
        source, _ = _TYPED_FIELDS.get(elem_type, (None, None))
        values = typed.pop(source, []) if source is not None else []
        if typed or (source is None and count):
            raise NotFastPath("tensor values in a field this reader does not decode")
        if len(values) != count:
            raise NotFastPath("tensor value count does not match the dimensions")
        return name, np.array(values, dtype=dtype).reshape(dims)

    def value_info(self, start: int, end: int) -> tuple[str, TensorType | None]:
        name, tensor_type = "", None
        for number, wire, a, b in self.fields(start, end):
            if number == 1:
                self.expect(wire, LENGTH)
                name = self.text(a, b)
            elif number == 2:
                self.expect(wire, LENGTH)
                tensor_type = self.type_proto(a, b)
        return name, tensor_type

    def type_proto(self, start: int, end: int) -> TensorType | None:
        result = None
        for number, wire, a, b in self.fields(start, end):
            if number == 1:
                self.expect(wire, LENGTH)
                if result is not None:
                    raise NotFastPath("tensor_type repeated (protobuf merges them)")
                result = self.tensor_type(a, b)
            elif number in (4, 5, 8, 9):
                raise NotFastPath("not a tensor type")
        return result

    def tensor_type(self, start: int, end: int) -> TensorType:
        elem_type, shape = 0, None
        for number, wire, a, b in self.fields(start, end):
            if number == 1:
                self.expect(wire, VARINT)
                elem_type = a
            elif number == 2:
                self.expect(wire, LENGTH)
                if shape is not None:
                    raise NotFastPath("shape repeated (protobuf merges them)")
                shape = self.shape(a, b)
        if elem_type and elem_type not in ELEMENT_TYPES:
            raise NotFastPath("unsupported element type")
        dtype = ELEMENT_TYPES[elem_type] if elem_type else "float32"
        return TensorType(dtype, None if shape is None else tuple(shape))

    def shape(self, start: int, end: int) -> list[Dim]:
        dims: list[Dim] = []
        for number, wire, a, b in self.fields(start, end):
            if number != 1:
                continue
            self.expect(wire, LENGTH)
            dim: Dim = None
            for n2, w2, a2, b2 in self.fields(a, b):
                if n2 == 1:  # dim_value and dim_param are a oneof: the last one set wins
                    self.expect(w2, VARINT)
                    value = _signed(a2)
                    dim = value if value > 0 else None
                elif n2 == 2:
                    self.expect(w2, LENGTH)
                    dim = self.text(a2, b2) or None
            dims.append(dim)
        return dims


def _signed(value: int) -> int:
    """A varint read as protobuf's int64 (negative numbers are sent as 64-bit two's complement)."""
    return value - (1 << 64) if value >= 1 << 63 else value
