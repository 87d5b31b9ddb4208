"""Errors of the .ecnn reader: every one is a ModelFormatError that names the file and the place."""

from __future__ import annotations

from edgecnn.errors import ModelFormatError


class EcnnFormatError(ModelFormatError):
    """A .ecnn file is damaged or malformed. ``where`` is a byte offset or a path in the GRAPH JSON."""

    def __init__(self, source: str, what: str, where: str = "") -> None:
        self.source = source
        self.what = what
        self.where = where
        at = f" (at {where})" if where else ""
        super().__init__(f"{source}: {what}{at}")


class EcnnVersionError(EcnnFormatError):
    """The file needs a newer reader: a newer major version, or required features this reader lacks."""


class EcnnChecksumError(EcnnFormatError):
    """A CRC-32 or the SHA-256 does not match the bytes it covers."""


class EcnnUnsupportedError(EcnnFormatError):
    """The file is well formed but uses an operator, storage type or section this edgecnn cannot use."""
