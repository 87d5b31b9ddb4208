"""Encrypted sections (format 1.3): AES-256-GCM over the GRAPH and DATA sections of a .ecnn file.

Each file gets a fresh 32-byte random salt (in its ENCRYPTION section); the key that encrypts it
is HKDF-SHA256(model key, salt), so no two files share an AES key. Inside a file a section is cut
into chunks of ``chunk_bytes`` plaintext bytes, each sealed as one GCM message whose 96-bit nonce
is (section kind, chunk index): unique within the file, and a key is never used by another file,
so no (key, nonce) pair repeats. Every chunk authenticates the header and section table (CRC
fields taken as zero) and the ENCRYPTION section as associated data, so an edit to any field, a
moved, swapped or dropped chunk, or a wrong key fails the GCM tag. Decryption writes straight into one buffer in memory
(never a file) and the plaintext is used only after every tag of the section has matched.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Iterator

import numpy as np

from edgecnn.format.errors import EcnnFormatError
from edgecnn.format.keys import KEY_BYTES, crypto_module
from edgecnn.format.layout import ALIGNMENT

SCHEME_HKDF_AES256_GCM = 1
RECORD = struct.Struct("<II32s24x")
"""The ENCRYPTION section: scheme, chunk size in bytes, HKDF salt, 24 reserved bytes (64 in all)."""
SALT_BYTES = 32
TAG_BYTES = 16
CHUNK_BYTES = 4 << 20
"""Plaintext bytes per GCM message: big enough that tags cost nothing, small enough to stay in cache."""
MIN_CHUNK, MAX_CHUNK = 4 << 10, 1 << 30
KDF_INFO = b"edgecnn .ecnn 1.3 AES-256-GCM file key"
MAX_CHUNKS = 2**32
"""The chunk index has 64 bits in the nonce; this bounds a section to 4 PiB at 1 MiB chunks."""

DECRYPT_FAILED = "cannot decrypt: wrong key, or the file was altered"
"""The one message of every failed tag: it says nothing about which byte or why."""


def nonce(kind: int, index: int) -> bytes:
    return struct.pack("<IQ", kind, index)


def chunk_count(plain: int, chunk: int) -> int:
    return max(1, -(-plain // chunk))


def sealed_length(plain: int, chunk: int = CHUNK_BYTES) -> int:
    """Stored bytes of a section of ``plain`` bytes: the plaintext's length plus one tag per chunk."""
    return plain + TAG_BYTES * chunk_count(plain, chunk)


def plain_length(stored: int, chunk: int) -> int | None:
    """The plaintext length a stored length implies, or None when no plaintext length gives it."""
    count = max(1, -(-stored // (chunk + TAG_BYTES)))
    plain = stored - TAG_BYTES * count
    return plain if plain >= 0 and sealed_length(plain, chunk) == stored else None


def file_key(model_key: bytes, salt: bytes) -> bytes:
    hashes = crypto_module("hazmat.primitives.hashes")
    hkdf = crypto_module("hazmat.primitives.kdf.hkdf")
    return bytes(hkdf.HKDF(hashes.SHA256(), KEY_BYTES, salt, KDF_INFO).derive(model_key))


class Sealer:
    """The writer's side: seals sections of one file under a fresh salt."""

    def __init__(self, model_key: bytes, chunk: int = CHUNK_BYTES) -> None:
        self.salt = os.urandom(SALT_BYTES)
        self.chunk = chunk
        aead = crypto_module("hazmat.primitives.ciphers.aead")
        self._aead = aead.AESGCM(file_key(model_key, self.salt))

    def record(self) -> bytes:
        return RECORD.pack(SCHEME_HKDF_AES256_GCM, self.chunk, self.salt)

    def seal(self, kind: int, pieces: Iterable[bytes | memoryview], frame: bytes) -> Iterator[bytes]:
        """The stored bytes of a section whose plaintext is ``pieces`` in order, chunk by chunk;
        ``frame`` is the file's authenticated_frame."""
        frame = frame + self.record()
        pending = bytearray()
        index = 0
        for piece in pieces:
            view = memoryview(piece).cast("B")
            while view:
                if not pending and len(view) >= self.chunk:  # a whole chunk inside the piece: no copy
                    body: bytes | bytearray | memoryview = view[: self.chunk]
                    view = view[self.chunk :]
                else:
                    take = min(self.chunk - len(pending), len(view))
                    pending += view[:take]
                    view = view[take:]
                    if len(pending) < self.chunk:
                        continue
                    body, pending = pending, bytearray()
                yield self._aead.encrypt(nonce(kind, index), body, frame)
                index += 1
        if pending or index == 0:
            yield self._aead.encrypt(nonce(kind, index), bytes(pending), frame)


class Opener:
    """The reader's side: checks the ENCRYPTION record and opens sections into memory."""

    def __init__(self, model_key: bytes, record: bytes, frame: bytes, source: str) -> None:
        self.source = source
        if len(record) != RECORD.size:
            raise EcnnFormatError(source, f"the ENCRYPTION section is {len(record)} bytes, not {RECORD.size}")
        scheme, chunk, salt = RECORD.unpack(record)
        if scheme != SCHEME_HKDF_AES256_GCM:
            raise EcnnFormatError(source, f"unknown encryption scheme {scheme}: written by a newer edgecnn")
        if not MIN_CHUNK <= chunk <= MAX_CHUNK:
            raise EcnnFormatError(
                source, f"encryption chunk size {chunk} is outside {MIN_CHUNK}..{MAX_CHUNK}"
            )
        self.chunk = chunk
        self.frame = frame + record
        self._key = file_key(model_key, salt)

    def plain_length(self, stored: int, name: str) -> int:
        plain = plain_length(stored, self.chunk)
        if plain is None or chunk_count(plain, self.chunk) > MAX_CHUNKS:
            raise EcnnFormatError(
                self.source, f"the encrypted {name} section has an impossible length {stored}"
            )
        return plain

    def open(self, kind: int, stored: memoryview, plain: int) -> memoryview:
        """The section's plaintext (read-only, in memory) after every chunk's tag matched."""
        ciphers = crypto_module("hazmat.primitives.ciphers")
        exceptions = crypto_module("exceptions")
        raw = np.empty(plain + TAG_BYTES + ALIGNMENT, np.uint8)  # update_into needs a block of slack
        skip = -raw.ctypes.data % ALIGNMENT  # blobs keep the 64-byte alignment they have in a mapped file
        buffer = raw[skip : skip + plain + TAG_BYTES]
        out = buffer.data
        position = stored_at = 0
        for index in range(chunk_count(plain, self.chunk)):
            size = min(self.chunk, plain - position)
            body = stored[stored_at : stored_at + size]
            tag = bytes(stored[stored_at + size : stored_at + size + TAG_BYTES])
            decryptor = ciphers.Cipher(
                ciphers.algorithms.AES(self._key), ciphers.modes.GCM(nonce(kind, index), tag)
            ).decryptor()
            decryptor.authenticate_additional_data(self.frame)
            try:
                decryptor.update_into(body, out[position:])
                decryptor.finalize()
            except exceptions.InvalidTag:
                raise EcnnFormatError(self.source, DECRYPT_FAILED) from None
            position += size
            stored_at += size + TAG_BYTES
        out.release()
        buffer.flags.writeable = False
        return buffer.data[:plain]
