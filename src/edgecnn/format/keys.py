"""Keys of protected .ecnn files: the AES-256 model key and the Ed25519 signing key pair.

A model key is 32 random bytes, held in a key file (64 hex digits, as ``edgecnn keygen`` writes
it), an environment variable (the same hex text) or handed over by the application through a
callback (a keystore, a secure element). Signing keys are Ed25519 in PEM files (PKCS#8 private,
SubjectPublicKeyInfo public). The ``cryptography`` package is imported only here, on first use.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from edgecnn.errors import ConfigurationError, EdgeCNNError, ModelFormatError
from edgecnn.limits import MemoryBudget, read_file_bounded

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

KEY_BYTES = 32
MAX_KEY_FILE = 16 << 10
"""Key files are a few hundred bytes; anything larger is not a key file."""


def crypto_module(name: str) -> ModuleType:
    """``cryptography.<name>``, or a ConfigurationError naming the extra that installs it."""
    import importlib

    try:
        return importlib.import_module(f"cryptography.{name}")
    except ImportError:
        raise ConfigurationError(
            "protected .ecnn files need the 'cryptography' package: pip install 'edgecnn[crypto]'"
        ) from None


def _read_key_file(path: str | os.PathLike[str], role: str) -> bytes:
    try:
        return read_file_bounded(path, MemoryBudget(MAX_KEY_FILE), role)
    except EdgeCNNError as exc:
        raise ConfigurationError(str(exc)) from None


def parse_model_key(raw: bytes, where: str) -> bytes:
    """32 key bytes from 64 hex digits (whitespace around them ignored) or from 32 raw bytes."""
    text = raw.strip()
    if len(text) == 2 * KEY_BYTES:
        try:
            return bytes.fromhex(text.decode("ascii"))
        except (UnicodeDecodeError, ValueError):
            pass
    if len(raw) == KEY_BYTES:
        return bytes(raw)
    raise ConfigurationError(f"{where} is not a model key: expected 64 hex digits (or 32 raw bytes)")


@dataclass(frozen=True)
class KeySource:
    """Where a model key comes from; read only when a file that needs it is opened.

    ``required``: a file opened with this key must be encrypted (an explicit key refuses a plain
    file, so a swapped-in unprotected model is not run by mistake); a key taken from the
    environment by default is used only for files that are encrypted."""

    fetch: Callable[[], bytes]
    where: str
    required: bool = True

    @staticmethod
    def from_file(path: str | os.PathLike[str], required: bool = True) -> KeySource:
        name = os.fspath(path)
        return KeySource(lambda: _read_key_file(name, "key file"), f"key file {name}", required)

    @staticmethod
    def from_env(variable: str, required: bool = True) -> KeySource:
        def read() -> bytes:
            value = os.environ.get(variable)
            if not value:
                raise ConfigurationError(f"environment variable {variable} is not set")
            return value.encode("ascii", "replace")

        return KeySource(read, f"environment variable {variable}", required)

    @staticmethod
    def from_callback(callback: Callable[[], bytes]) -> KeySource:
        return KeySource(callback, "the key callback")

    def key(self) -> bytes:
        """The 32 key bytes. ConfigurationError if the source does not hold a key; ModelFormatError
        if the application's callback raises, naming only the exception's type (its message may
        quote key material), with the exception kept as ``__cause__``."""
        try:
            raw = self.fetch()
        except EdgeCNNError:
            raise
        except Exception as exc:
            raise ModelFormatError(f"{self.where} failed ({type(exc).__name__})") from exc
        if not isinstance(raw, (bytes, bytearray)):
            raise ConfigurationError(f"{self.where} gave {type(raw).__name__}, not bytes")
        return parse_model_key(bytes(raw), self.where)


KeyLike = KeySource | bytes | str | os.PathLike[str] | Callable[[], bytes]
"""A model key as the API takes it: a KeySource, the 32 key bytes, a key file's path, or a callback."""


def key_source(key: KeyLike) -> KeySource:
    """The KeySource for any of the forms ``KeyLike`` lists."""
    if isinstance(key, KeySource):
        return key
    if isinstance(key, (bytes, bytearray)):
        raw = bytes(key)
        return KeySource(lambda: raw, "the key given")
    if isinstance(key, (str, os.PathLike)):
        return KeySource.from_file(key)
    if callable(key):
        return KeySource.from_callback(key)
    raise ConfigurationError(f"key= takes bytes, a key file path or a callback, not {type(key).__name__}")


def generate_model_key() -> bytes:
    """32 bytes from the operating system's CSPRNG."""
    return os.urandom(KEY_BYTES)


def model_key_text(key: bytes) -> bytes:
    """The key file's content: 64 hex digits and a newline."""
    return key.hex().encode("ascii") + b"\n"


# ------------------------------------------------------------------ signing
def generate_signing_key() -> tuple[bytes, bytes]:
    """A new Ed25519 key pair as (private PEM, public PEM)."""
    ed25519 = crypto_module("hazmat.primitives.asymmetric.ed25519")
    serialization = crypto_module("hazmat.primitives.serialization")
    private = ed25519.Ed25519PrivateKey.generate()
    private_pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public_pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private_pem, public_pem


def signing_key(key: Any) -> Ed25519PrivateKey:
    """An Ed25519 private key from itself, PEM bytes or a PEM file's path."""
    ed25519 = crypto_module("hazmat.primitives.asymmetric.ed25519")
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return key
    raw, where = _pem(key, "signing key file")
    serialization = crypto_module("hazmat.primitives.serialization")
    try:
        loaded = serialization.load_pem_private_key(raw, password=None)
    except (ValueError, TypeError):
        loaded = None
    if not isinstance(loaded, ed25519.Ed25519PrivateKey):
        raise ConfigurationError(f"{where} is not an unencrypted Ed25519 private key in PEM")
    return loaded


def verifying_key(key: Any) -> Ed25519PublicKey:
    """An Ed25519 public key from itself, PEM bytes, 32 raw bytes or a PEM file's path."""
    ed25519 = crypto_module("hazmat.primitives.asymmetric.ed25519")
    if isinstance(key, ed25519.Ed25519PublicKey):
        return key
    if isinstance(key, (bytes, bytearray)) and len(key) == KEY_BYTES:
        return ed25519.Ed25519PublicKey.from_public_bytes(bytes(key))
    raw, where = _pem(key, "public key file")
    serialization = crypto_module("hazmat.primitives.serialization")
    try:
        loaded = serialization.load_pem_public_key(raw)
    except (ValueError, TypeError):
        loaded = None
    if not isinstance(loaded, ed25519.Ed25519PublicKey):
        raise ConfigurationError(f"{where} is not an Ed25519 public key in PEM")
    return loaded


def raw_public_key(key: Ed25519PublicKey) -> bytes:
    serialization = crypto_module("hazmat.primitives.serialization")
    return bytes(key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw))


def _pem(key: Any, role: str) -> tuple[bytes, str]:
    if isinstance(key, (bytes, bytearray)):
        return bytes(key), f"the {role.removesuffix(' file')} given"
    if isinstance(key, (str, os.PathLike)):
        return _read_key_file(key, role), f"{role} {os.fspath(key)}"
    raise ConfigurationError(
        f"a {role.removesuffix(' file')} is PEM bytes or a path, not {type(key).__name__}"
    )
