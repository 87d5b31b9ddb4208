""".ecnn: the ONNX seeds saved with every storage (raw, float16, int8, CSR, zlib, lzma). A file is
taken apart into header fields, section table, GRAPH JSON and DATA blobs (docs/formats/ecnn.md);
mutations edit the JSON (tensor table, shapes, attributes), a blob, a header or table field, or bytes;
most cases are put back together with every CRC and the SHA-256 recomputed, so the edit reaches the
checks behind the checksums."""

from __future__ import annotations

import hashlib
import json
import random
import struct
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import mutate
import target_onnx

import edgecnn

Case = dict[str, bytes]
NAME = "ecnn"
HEADER = struct.Struct("<4sHHIIQI36s")
ENTRY = struct.Struct("<IIQQII")
ALIGN = 64
DIGEST = 32
STORAGES = ("float16", "int8", "csr", "csr:int8", "float16+zlib", "csr:int8+lzma", "raw+zlib")


@dataclass
class Frame:
    """An .ecnn file taken apart; :meth:`pack` puts it back with consistent checksums."""

    major: int
    minor: int
    flags: int
    sections: list[list[int]]  # kind, flags, offset, length, crc (as read; offsets recomputed on pack)
    graph: dict
    data: bytes

    @staticmethod
    def parse(blob: bytes) -> Frame | None:
        try:
            magic, major, minor, flags, count, _, _, _ = HEADER.unpack_from(blob, 0)
            entries = [list(ENTRY.unpack_from(blob, HEADER.size + i * ENTRY.size)[:5]) for i in range(count)]
            graph_entry = next(e for e in entries if e[0] == 1)
            data_entry = next(e for e in entries if e[0] == 2)
            graph = json.loads(blob[graph_entry[2] : graph_entry[2] + graph_entry[3]])
            data = blob[data_entry[2] : data_entry[2] + data_entry[3]]
        except (struct.error, StopIteration, ValueError):
            return None
        return (
            Frame(major, minor, flags, [graph_entry, data_entry], graph, data) if magic == b"ECNN" else None
        )

    def pack(self, fix_tensor_crcs: bool = True) -> bytes:
        if fix_tensor_crcs:
            tensors = self.graph.get("tensors")
            for entry in tensors if isinstance(tensors, list) else []:
                try:
                    start, length = int(entry["offset"]), int(entry["nbytes"])
                    if start >= 0 and start + length <= len(self.data):
                        entry["crc32"] = zlib.crc32(self.data[start : start + length])
                except (KeyError, TypeError, ValueError, OverflowError):
                    continue
        graph = json.dumps(self.graph).encode()
        table_end = HEADER.size + ENTRY.size * len(self.sections)
        graph_offset = _aligned(table_end)
        data_offset = _aligned(graph_offset + len(graph))
        digest_offset = _aligned(data_offset + len(self.data))
        entries = [
            (1, self.sections[0][1], graph_offset, len(graph), zlib.crc32(graph)),
            (2, self.sections[1][1], data_offset, len(self.data), zlib.crc32(self.data)),
        ]
        table = b"".join(ENTRY.pack(*entry, 0) for entry in entries)
        size = digest_offset + DIGEST
        header = HEADER.pack(b"ECNN", self.major, self.minor, self.flags, len(entries), size, 0, bytes(36))
        crc = zlib.crc32(header + table)
        header = HEADER.pack(b"ECNN", self.major, self.minor, self.flags, len(entries), size, crc, bytes(36))
        body = bytearray(digest_offset)
        body[: len(header)] = header
        body[HEADER.size : table_end] = table
        body[graph_offset : graph_offset + len(graph)] = graph
        body[data_offset : data_offset + len(self.data)] = self.data
        return bytes(body) + hashlib.sha256(body).digest()


def _aligned(offset: int) -> int:
    return (offset + ALIGN - 1) // ALIGN * ALIGN


def seeds() -> list[Case]:
    cases = []
    with tempfile.TemporaryDirectory() as folder:
        for index, seed in enumerate(target_onnx.seeds()):
            source = Path(folder) / f"seed{index}.onnx"
            source.write_bytes(seed["model.onnx"])
            model = edgecnn.load(source)
            names = list(model.graph.initializers)
            for storage in (None, *STORAGES):
                target = Path(folder) / "model.ecnn"
                plan = None if storage is None else {name: storage for name in names}
                try:
                    model.save(target, plan)
                except edgecnn.EdgeCNNError:  # a storage that does not fit these tensors (int8 of int64)
                    continue
                cases.append({"model.ecnn": target.read_bytes()})
    return cases


def _edit_blob(frame: Frame, rng: random.Random) -> None:
    tensors = frame.graph.get("tensors")
    if not isinstance(tensors, list) or not tensors:
        return
    entry = rng.choice(tensors)
    try:
        start, length = int(entry["offset"]), int(entry["nbytes"])
    except (KeyError, TypeError, ValueError, OverflowError):
        return
    blob = frame.data[start : start + length]
    frame.data = frame.data[:start] + mutate.mutate_bytes(blob, rng) + frame.data[start + length :]


def _edit_frame_field(blob: bytes, rng: random.Random) -> bytes:
    """One header or section-table word set to an edge value (checksums left as they were)."""
    fields = [(4, "<H"), (6, "<H"), (8, "<I"), (12, "<I"), (16, "<Q"), (24, "<I")]
    fields += [
        (HEADER.size + 32 * i + o, f)
        for i in range(2)
        for o, f in ((0, "<I"), (4, "<I"), (8, "<Q"), (16, "<Q"))
    ]
    offset, fmt = rng.choice(fields)
    bits = struct.calcsize(fmt) * 8
    value = mutate.clamp(mutate.interesting_int(rng), bits, signed=False)
    return blob[:offset] + struct.pack(fmt, value) + blob[offset + bits // 8 :]


def mutate_case(case: Case, rng: random.Random) -> Case:
    blob = case["model.ecnn"]
    frame = Frame.parse(blob)
    action = rng.random()
    if frame is None or action < 0.1:
        return {"model.ecnn": mutate.mutate_bytes(blob, rng)}
    if action < 0.2:
        return {"model.ecnn": _edit_frame_field(blob, rng)}
    for _ in range(rng.choice((1, 1, 2))):
        if rng.random() < 0.75:
            mutate.mutate_json(frame.graph, rng)
        else:
            _edit_blob(frame, rng)
    if rng.random() < 0.1:
        frame.minor = rng.choice((0, 1, 2, 3, 99))
    packed = frame.pack(fix_tensor_crcs=rng.random() < 0.9)
    return {"model.ecnn": packed}
