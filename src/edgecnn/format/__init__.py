"""edgecnn's native model file, ``.ecnn``: one file with a checked header, the graph as JSON and
every tensor as a 64-byte-aligned blob: memory-mapped on load when raw, decoded when stored as
float16, int8 or CSR; encrypted and signed on request (docs/security.md). Spec: docs/formats/ecnn.md."""

from edgecnn.format.codec import StorageChoice
from edgecnn.format.errors import EcnnChecksumError, EcnnFormatError, EcnnUnsupportedError, EcnnVersionError
from edgecnn.format.keys import KeySource
from edgecnn.format.layout import FORMAT_MAJOR, FORMAT_MINOR, Header, SectionInfo
from edgecnn.format.reader import load_ecnn, read_header, read_sections
from edgecnn.format.tensors import STORAGE_READERS, stored_nbytes
from edgecnn.format.writer import save_ecnn

__all__ = [
    "FORMAT_MAJOR",
    "FORMAT_MINOR",
    "STORAGE_READERS",
    "EcnnChecksumError",
    "EcnnFormatError",
    "EcnnUnsupportedError",
    "EcnnVersionError",
    "Header",
    "KeySource",
    "SectionInfo",
    "StorageChoice",
    "load_ecnn",
    "read_header",
    "read_sections",
    "save_ecnn",
    "stored_nbytes",
]
