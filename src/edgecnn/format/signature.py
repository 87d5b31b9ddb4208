"""Signed .ecnn files (format 1.3): an Ed25519 signature over every byte of the file before it.

The SIGNATURE section is the file's last section and ends where the SHA-256 digest starts: the
signer's 32-byte public key, then the 64-byte signature. What is signed is a fixed context string
followed by the SHA-256 of bytes [0, start of the signature field): the header, the section table,
every section (ciphertext, for an encrypted file), all padding and the public key. The digest after
the signature is a hash of signed bytes and of the signature, so it carries nothing of its own.
Whoever edits the file and recomputes the CRCs and the SHA-256 still cannot produce the signature.
"""

from __future__ import annotations

import hashlib
import mmap
import struct
from typing import Any

from edgecnn.format.errors import EcnnFormatError
from edgecnn.format.keys import crypto_module, raw_public_key, verifying_key
from edgecnn.format.layout import Header, SectionKind

CONTEXT = b"edgecnn .ecnn signature 1\x00"
PUBLIC_KEY_BYTES = 32
SIGNATURE_BYTES = 64
SECTION_BYTES = PUBLIC_KEY_BYTES + SIGNATURE_BYTES
RECORD = struct.Struct(f"<{PUBLIC_KEY_BYTES}s{SIGNATURE_BYTES}s")

SIGNATURE_FAILED = "signature check failed: not signed by this key, or altered after signing"


def statement(digest: bytes) -> bytes:
    """The message Ed25519 signs for a file whose signed bytes hash to ``digest``."""
    return CONTEXT + digest


def sign(private_key: Any, digest: bytes) -> bytes:
    """The 64-byte signature of a file's signed-bytes digest."""
    return bytes(private_key.sign(statement(digest)))


def unsigned_record(private_key: Any) -> bytes:
    """The SIGNATURE section with its signature field zero (what the table's CRC covers)."""
    return RECORD.pack(raw_public_key(private_key.public_key()), bytes(SIGNATURE_BYTES))


def check_signature(mapped: mmap.mmap, header: Header, public_key: Any, source: str) -> None:
    """EcnnFormatError unless the file is signed, by ``public_key``, and unchanged since."""
    key = verifying_key(public_key)
    section = header.find(SectionKind.SIGNATURE)
    if section is None:
        raise EcnnFormatError(source, "the file is not signed (it has no SIGNATURE section)")
    if section.length != SECTION_BYTES:
        raise EcnnFormatError(source, SIGNATURE_FAILED)
    signed_end = section.offset + PUBLIC_KEY_BYTES
    with memoryview(mapped) as view:
        embedded, signature = RECORD.unpack(view[section.offset : section.offset + SECTION_BYTES])
        digest = hashlib.sha256(view[:signed_end]).digest()
    exceptions = crypto_module("exceptions")
    if embedded != raw_public_key(key):
        raise EcnnFormatError(source, SIGNATURE_FAILED)
    try:
        key.verify(signature, statement(digest))
    except exceptions.InvalidSignature:
        raise EcnnFormatError(source, SIGNATURE_FAILED) from None
