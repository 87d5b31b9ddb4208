"""The --encrypt and --sign options of the commands that write .ecnn files (convert, compress)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

ENCRYPT_OPTION: Any = typer.Option(
    None,
    "--encrypt",
    metavar="KEYFILE",
    help="Encrypt the .ecnn output with the model key in this file (edgecnn keygen; docs/security.md).",
)
SIGN_OPTION: Any = typer.Option(
    None,
    "--sign",
    metavar="KEYFILE",
    help="Sign the .ecnn output with the Ed25519 private key in this PEM file (edgecnn keygen --signing).",
)


def protection(encrypt: Path | None, sign: Path | None) -> dict[str, Any]:
    """save_ecnn's ``encrypt`` and ``sign`` arguments for the options given (keys read on save)."""
    from edgecnn.format.keys import KeySource

    return {
        "encrypt": KeySource.from_file(encrypt) if encrypt is not None else None,
        "sign": sign,
    }
