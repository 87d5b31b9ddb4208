"""Shared pieces of the .ecnn tests (importable because conftest.py puts this folder on sys.path): a small CNN graph, deep graph equality, and an independent
re-assembler that writes files from parts (so a test can plant exactly one defect with every
checksum still right). The assembler follows docs/formats/ecnn.md, not edgecnn's writer."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.ops.common import AutoPad
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.dense import GemmAttrs
from edgecnn.ops.pool import MaxPoolAttrs
from edgecnn.ops.registry import NoAttrs
from edgecnn.ops.shape import ConstantAttrs, FlattenAttrs

HEADER = struct.Struct("<4sHHIIQI36x")
ENTRY = struct.Struct("<IIQQII")
GRAPH, DATA = 1, 2


def small_cnn(seed: int = 0) -> Graph:
    """Conv -> Relu -> MaxPool -> Flatten -> Gemm (+ a Constant added to the logits), batch symbolic."""
    rng = np.random.default_rng(seed)
    inits = {
        "conv.w": rng.standard_normal((4, 3, 3, 3)).astype(np.float32),
        "conv.b": rng.standard_normal(4).astype(np.float32),
        "fc.w": rng.standard_normal((5, 64)).astype(np.float32),
        "fc.b": rng.standard_normal(5).astype(np.float32),
    }
    nodes = [
        Node(
            "Conv",
            "conv",
            ["x", "conv.w", "conv.b"],
            ["c"],
            ConvAttrs((3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
        ),
        Node("Relu", "relu", ["c"], ["r"], NoAttrs()),
        Node("MaxPool", "pool", ["r"], ["p"], MaxPoolAttrs((2, 2), (2, 2), auto_pad=AutoPad.VALID)),
        Node("Flatten", "flat", ["p"], ["f"], FlattenAttrs(1)),
        Node("Gemm", "fc", ["f", "fc.w", "fc.b"], ["g"], GemmAttrs(trans_b=True)),
        Node("Constant", "shift", [], ["k"], ConstantAttrs(np.linspace(-1, 1, 5, dtype=np.float32))),
        Node("Add", "add", ["g", "k"], ["logits"], NoAttrs()),
    ]
    return Graph(
        [TensorSpec("x", "float32", ("batch", 3, 8, 8))],
        ["logits"],
        nodes,
        inits,
        name="small_cnn",
        metadata={"author": "tests", "note": "ünïcode ✓"},
    )


COMPRESSED_PLAN = {"conv.w": "int8", "conv.b": "float16", "fc.w": "csr:int8", "fc.b": "csr"}


def compressed_cnn(seed: int = 0) -> Graph:
    """small_cnn with fc.w pruned to about 30% density, for files stored with COMPRESSED_PLAN."""
    graph = small_cnn(seed)
    w = graph.initializers["fc.w"]
    keep = np.random.default_rng(seed + 1).random(w.shape) < 0.3
    graph.initializers["fc.w"] = np.where(keep, w, 0).astype(np.float32)
    return graph


# ------------------------------------------------------------------ equality
def values_equal(a: Any, b: Any) -> bool:
    """Equality that treats NaN as equal to NaN and compares arrays by dtype, shape and content."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (
            isinstance(a, np.ndarray)
            and isinstance(b, np.ndarray)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
        )
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(values_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(values_equal(a[k], b[k]) for k in a)
    if dataclasses.is_dataclass(a):
        return all(values_equal(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    return a == b


def assert_graphs_equal(a: Graph, b: Graph) -> None:
    assert (a.name, a.inputs, a.outputs, a.metadata, a.output_types) == (
        b.name,
        b.inputs,
        b.outputs,
        b.metadata,
        b.output_types,
    )
    assert list(a.initializers) == list(b.initializers)
    for name in a.initializers:
        assert values_equal(np.asarray(a.initializers[name]), b.initializers[name]), name
    assert len(a.nodes) == len(b.nodes)
    for x, y in zip(a.nodes, b.nodes):
        assert (x.op, x.name, x.inputs, x.outputs) == (y.op, y.name, y.inputs, y.outputs)
        assert values_equal(x.attrs, y.attrs), f"{x}: {x.attrs} != {y.attrs}"


# ------------------------------------------------------------- file surgery
@dataclass
class Parts:
    """A .ecnn file taken apart: header fields, GRAPH document, DATA bytes, extra sections."""

    document: dict[str, Any]
    data: bytes
    major: int = 1
    minor: int = 0
    flags: int = 0
    extra: list[tuple[int, int, bytes]] = field(default_factory=list)  # (kind, section flags, bytes)


def split(path: Path) -> Parts:
    raw = path.read_bytes()
    _, major, minor, flags, count, _, _ = HEADER.unpack_from(raw, 0)
    sections = [ENTRY.unpack_from(raw, HEADER.size + i * ENTRY.size) for i in range(count)]
    by_kind = {kind: raw[off : off + length] for kind, _, off, length, _, _ in sections}
    return Parts(json.loads(by_kind[GRAPH]), by_kind[DATA], major, minor, flags)


def align(n: int) -> int:
    return -(-n // 64) * 64


def assemble(parts: Parts, path: Path, graph_bytes: bytes | None = None) -> Path:
    """Write ``parts`` as a file whose CRCs and SHA-256 are all right."""
    body = graph_bytes if graph_bytes is not None else json.dumps(parts.document).encode()
    payloads = [(GRAPH, 1, body), (DATA, 1, parts.data), *parts.extra]
    offset = align(HEADER.size + ENTRY.size * len(payloads))
    table, blobs = b"", []
    for kind, sflags, payload in payloads:
        table += ENTRY.pack(kind, sflags, offset, len(payload), zlib.crc32(payload), 0)
        blobs.append((offset, payload))
        offset = align(offset + len(payload))
    size = offset + 32
    head = HEADER.pack(b"ECNN", parts.major, parts.minor, parts.flags, len(payloads), size, 0)
    head = HEADER.pack(
        b"ECNN", parts.major, parts.minor, parts.flags, len(payloads), size, zlib.crc32(head + table)
    )
    out = bytearray(size - 32)
    out[: len(head + table)] = head + table
    for at, payload in blobs:
        out[at : at + len(payload)] = payload
    path.write_bytes(bytes(out) + hashlib.sha256(out).digest())
    return path


def reseal(raw: bytes | bytearray) -> bytes:
    """Recompute the header CRC and the SHA-256 of a file whose header fields were edited."""
    out = bytearray(raw)
    count = min(struct.unpack_from("<I", out, 12)[0], (len(out) - HEADER.size) // ENTRY.size)
    out[24:28] = bytes(4)
    crc = zlib.crc32(bytes(out[: HEADER.size + count * ENTRY.size]))
    out[24:28] = struct.pack("<I", crc)
    if len(out) >= 32:
        out[-32:] = hashlib.sha256(out[:-32]).digest()
    return bytes(out)
