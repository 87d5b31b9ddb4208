"""`edgecnn keygen`: a new model key (AES-256, for --encrypt) or Ed25519 signing key pair (--sign)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import typer

from edgecnn.cli.console import console

NAME = "keygen"

PRIVATE_MODE = 0o600
PUBLIC_MODE = 0o644


def command(
    output: Path = typer.Argument(..., help="Key file to write (the private key, with --signing)."),
    signing: bool = typer.Option(
        False, "--signing", help="An Ed25519 signing key pair: OUTPUT (private) and OUTPUT.pub (public)."
    ),
    force: bool = typer.Option(False, "--force", help="Replace existing key files."),
) -> None:
    """Write a new random model key for `convert/compress --encrypt` (or, with --signing, a key pair
    for --sign and load(verify_signature=)). Key files are readable by their owner only."""
    from edgecnn.atomic import atomic_write
    from edgecnn.errors import ConfigurationError
    from edgecnn.format.keys import generate_model_key, generate_signing_key, model_key_text

    public = output.with_name(output.name + ".pub")
    targets = [output, public] if signing else [output]
    existing = [str(path) for path in targets if path.exists()]
    if existing and not force:
        raise ConfigurationError(
            f"{', '.join(existing)} exists: replacing a key loses every model it protects "
            "(pass --force to replace it)"
        )
    if signing:
        private_pem, public_pem = generate_signing_key()
        contents = [(output, private_pem, PRIVATE_MODE), (public, public_pem, PUBLIC_MODE)]
    else:
        contents = [(output, model_key_text(generate_model_key()), PRIVATE_MODE)]
    for path, content, mode in contents:
        if path.exists():  # --force: the new file must not inherit a looser mode from the old one
            path.chmod(mode)
        atomic_write(path, _writer(content), error=ConfigurationError, what="key file", mode=mode)
        console.print(f"wrote {path}")


def _writer(content: bytes) -> Callable[[BinaryIO], None]:
    def write(file: BinaryIO) -> None:
        file.write(content)

    return write
