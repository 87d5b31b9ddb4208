"""edgecnn's native model file, ``.ecnn``: one file with a checked header, the graph as JSON and
every tensor as a 64-byte-aligned blob that is memory-mapped on load. Spec: docs/formats/ecnn.md."""

from edgecnn.format.errors import EcnnChecksumError, EcnnFormatError, EcnnUnsupportedError, EcnnVersionError
from edgecnn.format.layout import FORMAT_MAJOR, FORMAT_MINOR, Header, SectionInfo
from edgecnn.format.reader import load_ecnn, read_header, read_sections
from edgecnn.format.writer import save_ecnn

__all__ = [
    "FORMAT_MAJOR",
    "FORMAT_MINOR",
    "EcnnChecksumError",
    "EcnnFormatError",
    "EcnnUnsupportedError",
    "EcnnVersionError",
    "Header",
    "SectionInfo",
    "load_ecnn",
    "read_header",
    "read_sections",
    "save_ecnn",
]
