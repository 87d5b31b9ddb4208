"""Storages "zlib" and "lzma" (format 1.2): any other storage's blob, entropy-coded as one stream and
decoded at load (issue 5: entropy coding over quantised and sparse streams).

Before coding, the filter "delta-shuffle" turns integer parts into differences and splits multi-byte
elements into byte planes (CSR column indices shrink several-fold more that way). The entry keeps the
wrapped storage's keys in ``inner`` (``{"storage": "csr", "nnz": .., "values":
"int8"}``), so the decoded blob's exact length is computed from them, like any layout, before a
byte is decoded: decoding stops one byte past that length (a stream that would expand further is
refused without being expanded), and a stream that ends early, has trailing bytes or is damaged is
refused too. The decoded blob then goes through the wrapped storage's own checks.

zlib (DEFLATE) and lzma (xz container) are in Python's standard library: no new dependency, both
formats are decades old and have bounded decoders (zlib: 32 KiB window; lzma: ``memlimit``).
"""

from __future__ import annotations

import lzma
import zlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from edgecnn.errors import GraphError
from edgecnn.format.blob import (
    MAX_DECODED_BYTES,
    BlobLayout,
    DataSection,
    TensorEntry,
    lay_out,
    little_endian,
    read_part,
)
from edgecnn.format.checked_json import CheckedJson
from edgecnn.format.codec import EncodedBlob, StorageChoice, StorageCodec

MAX_CODED_BYTES = 2**62
LZMA_MEMLIMIT = 1 << 26
"""Most memory the lzma decoder may use (64 MiB, enough for xz's largest preset; edgecnn's writer
uses preset 6, whose 8 MiB dictionary needs about 9 MiB to decode)."""
ZLIB_LEVEL = 6
LZMA_PRESET = 6


class StreamError(Exception):
    """A coded stream that does not decode to exactly the expected bytes."""


FILTERS = ("none", "delta-shuffle")
"""Reversible transforms of the blob's parts before coding (the entry's ``filter`` key)."""


def blob_bytes(layout: BlobLayout, arrays: Mapping[str, np.ndarray]) -> bytearray:
    """The blob as the file would hold it: each part at its offset, zeros between."""
    blob = bytearray(layout.nbytes)
    for name, part in layout.parts.items():
        flat = np.ascontiguousarray(arrays[name], dtype=little_endian(part.dtype)).reshape(-1)
        blob[part.offset : part.offset + part.nbytes] = flat.view(np.uint8).data
    return blob


def delta_shuffle(layout: BlobLayout, blob: bytearray, inverse: bool = False) -> bytearray:
    """Filter "delta-shuffle", in place: each integer part of more than one byte becomes the wrapping
    differences of consecutive elements (CSR's sorted column indices and indptr turn into small
    numbers), split into byte planes (all first bytes, then all second bytes...), so that the
    near-zero high bytes form long runs for the coder. Floating-point parts are left as they are
    (measured: byte planes of pruned or quantised weights code worse with zlib and lzma)."""
    for part in layout.parts.values():
        size = np.dtype(part.dtype).itemsize
        if size == 1 or part.count == 0 or np.dtype(part.dtype).kind not in "iu":
            continue
        segment = np.frombuffer(blob, np.uint8, part.nbytes, part.offset)
        unsigned = np.dtype(f"<u{size}")
        if inverse:
            elements = np.ascontiguousarray(segment.reshape(size, part.count).T).view(unsigned).reshape(-1)
            result = np.cumsum(elements, dtype=unsigned).view(np.uint8)
        else:
            elements = np.diff(segment.view(unsigned), prepend=unsigned.type(0)).astype(unsigned)
            result = elements.view(np.uint8).reshape(part.count, size).T.reshape(-1)
        blob[part.offset : part.offset + part.nbytes] = result.tobytes()
    return blob


class EntropyCodec(StorageCodec):
    """A wrapper around the storages in ``inner_codecs`` (never around another entropy coder)."""

    since_minor = 2

    def __init__(self, inner_codecs: Mapping[str, StorageCodec]) -> None:
        self.inner_codecs = inner_codecs

    # ---------------------------------------------------------------- coder
    def compress(self, blob: bytes) -> bytes:
        raise NotImplementedError

    def decompress(self, stream: bytes, expected: int) -> bytes:
        """Exactly ``expected`` bytes, or StreamError; never produces more than ``expected + 1``."""
        raise NotImplementedError

    # ------------------------------------------------------------- storage
    def parse_params(
        self, obj: Mapping[str, Any], dtype: str, shape: tuple[int, ...], where: str, check: CheckedJson
    ) -> dict[str, Any]:
        inner = check.member(obj, "inner", dict, where)
        inner_where = f"{where}.inner"
        storage = check.member(inner, "storage", str, inner_where)
        codec = self.inner_codecs.get(storage)
        if codec is None:
            check.fail(
                f"storage '{self.name}' wraps one of {', '.join(self.inner_codecs)}, not '{storage}'",
                f"{inner_where}.storage",
            )
        inner_params = codec.parse_params(inner, dtype, shape, inner_where, check)
        decoded = codec.layout(dtype, shape, inner_params).nbytes
        if decoded > MAX_DECODED_BYTES:
            check.fail(
                f"the '{storage}' blob inside decodes to {decoded} bytes, more than this reader's "
                f"limit of {MAX_DECODED_BYTES}",
                inner_where,
            )
        coded = check.integer(
            check.member(obj, "coded_nbytes", int, where), f"{where}.coded_nbytes", 0, MAX_CODED_BYTES
        )
        stream_filter = check.member(obj, "filter", str, where)
        if stream_filter not in FILTERS:
            check.fail(f"unknown filter '{stream_filter}' (one of {', '.join(FILTERS)})", f"{where}.filter")
        return {"inner": {"storage": storage, **inner_params}, "filter": stream_filter, "coded_nbytes": coded}

    def layout(self, dtype: str, shape: tuple[int, ...], params: Mapping[str, Any]) -> BlobLayout:
        return lay_out([("stream", "uint8", params["coded_nbytes"])])

    def _inner(self, params: Mapping[str, Any]) -> tuple[StorageCodec, dict[str, Any]]:
        inner = dict(params["inner"])
        return self.inner_codecs[inner.pop("storage")], inner

    def read(self, entry: TensorEntry, data: DataSection, check: CheckedJson) -> np.ndarray:
        codec, inner_params = self._inner(entry.params)
        inner_layout = codec.layout(entry.dtype, entry.shape, inner_params)
        stream = read_part(entry, data, "stream")
        try:
            blob = self.decompress(stream.tobytes(), inner_layout.nbytes)
            if entry.params["filter"] == "delta-shuffle":
                blob = bytes(delta_shuffle(inner_layout, bytearray(blob), inverse=True))
        except StreamError as err:
            check.fail(
                f"tensor '{entry.name}': the {self.name} stream is damaged: {err}",
                f"{entry.where}, file bytes [{data.offset + entry.offset}, "
                f"{data.offset + entry.offset + entry.nbytes})",
            )
        inner_entry = TensorEntry(
            entry.name,
            entry.dtype,
            entry.shape,
            0,
            inner_layout.nbytes,
            0,
            entry.where,
            codec.name,
            inner_params,
            inner_layout,
        )
        decoded = DataSection(blob, 0, len(blob), place=f"byte of the decoded {self.name} stream")
        return codec.read(inner_entry, decoded, check)

    def plan_params(self, array: np.ndarray, choice: StorageChoice, where: str) -> dict[str, Any]:
        """The coded size is only known by coding, so this encodes (it is not cheap)."""
        return self.encode(array, choice, where).params

    def encode(self, array: np.ndarray, choice: StorageChoice, where: str) -> EncodedBlob:
        inner_choice = choice.inner
        codec = self.inner_codecs.get(inner_choice.kind)
        if codec is None:
            raise GraphError(
                f"cannot store {where} as '{choice}': '{self.name}' wraps one of {', '.join(self.inner_codecs)}"
            )
        inner = codec.encode(array, inner_choice, where)
        layout = codec.layout(array.dtype.name, array.shape, inner.params)
        stream = self.compress(bytes(delta_shuffle(layout, blob_bytes(layout, inner.arrays))))
        params = {
            "inner": {"storage": codec.name, **inner.params},
            "filter": "delta-shuffle",
            "coded_nbytes": len(stream),
        }
        return EncodedBlob(params, {"stream": np.frombuffer(stream, np.uint8)})


class ZlibCodec(EntropyCodec):
    """DEFLATE in a zlib wrapper (RFC 1950/1951; its Adler-32 is checked by the decoder)."""

    name = "zlib"

    def compress(self, blob: bytes) -> bytes:
        return zlib.compress(blob, ZLIB_LEVEL)

    def decompress(self, stream: bytes, expected: int) -> bytes:
        decoder = zlib.decompressobj()
        try:
            blob = decoder.decompress(stream, expected + 1)  # max_length 0 would mean unlimited
        except zlib.error as err:
            raise StreamError(str(err)) from None
        return _checked(blob, expected, decoder.eof, bool(decoder.unused_data or decoder.unconsumed_tail))


class LzmaCodec(EntropyCodec):
    """LZMA2 in the .xz container (its CRC-32 check is verified by the decoder)."""

    name = "lzma"

    def compress(self, blob: bytes) -> bytes:
        return lzma.compress(blob, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC32, preset=LZMA_PRESET)

    def decompress(self, stream: bytes, expected: int) -> bytes:
        decoder = lzma.LZMADecompressor(format=lzma.FORMAT_XZ, memlimit=LZMA_MEMLIMIT)
        try:
            blob = decoder.decompress(stream, expected + 1)
        except lzma.LZMAError as err:
            raise StreamError(str(err)) from None
        return _checked(blob, expected, decoder.eof, bool(decoder.unused_data))


def _checked(blob: bytes, expected: int, ended: bool, trailing: bool) -> bytes:
    if len(blob) > expected:
        raise StreamError(f"it decodes to more than the {expected} bytes its entry implies")
    if not ended:
        raise StreamError(f"it ends after {len(blob)} of the {expected} bytes its entry implies")
    if len(blob) < expected:
        raise StreamError(f"it decodes to {len(blob)} bytes, but its entry implies {expected}")
    if trailing:
        raise StreamError("bytes follow the end of the coded stream")
    return blob
