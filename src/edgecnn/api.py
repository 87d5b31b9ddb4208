"""``edgecnn.load``: the one entry point for every model format."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgecnn.errors import ConfigurationError, ModelFormatError
from edgecnn.importers import load_graph, sniff_format
from edgecnn.ir.graph import Graph
from edgecnn.limits import regular_file_size, using_budget
from edgecnn.model import Model
from edgecnn.runtime.options import RuntimeOptions

if TYPE_CHECKING:
    from edgecnn.format.keys import KeyLike, KeySource

MODEL_KEY_FILE_ENV = "EDGECNN_MODEL_KEY_FILE"
MODEL_KEY_ENV = "EDGECNN_MODEL_KEY"


def load(
    path: str | os.PathLike[str],
    weights: str | os.PathLike[str] | None = None,
    *,
    threads: int | None = None,
    device: str = "cpu",
    key: KeyLike | None = None,
    verify_signature: Any = None,
    verify: bool | None = None,
    memory_limit: int | str | None = None,
) -> Model:
    """Load a model file; the importer is chosen by the file's content and extension.

    ``weights`` is the separate weights file of formats that have one (Caffe, Darknet).
    ``threads`` defaults to EDGECNN_NUM_THREADS, else to every core this process may use.
    ``memory_limit`` (bytes, or a size such as "2G") bounds what the file may declare and what a
    plan may allocate; default EDGECNN_MEMORY_LIMIT, else most of the memory available now.
    For .ecnn files (docs/security.md): ``key`` opens an encrypted file (bytes, a key file's path,
    a callback returning the key, or a KeySource; default: EDGECNN_MODEL_KEY_FILE, else
    EDGECNN_MODEL_KEY, used for encrypted files only); ``verify_signature`` (an Ed25519 public key
    or its PEM file) refuses a file it did not sign; ``verify`` None checks the weights' CRCs of
    files up to 256 MiB, True every byte, False none. Other formats carry no checksums.
    """
    options = RuntimeOptions.resolve(threads=threads, device=device, memory_limit=memory_limit)
    with using_budget(options.budget):
        graph = _load_graph(path, weights, key, verify_signature, verify)
    return Model(graph, options)


def environment_key() -> KeySource | None:
    """The model key the environment names (a key file first), for encrypted files only."""
    from edgecnn.format.keys import KeySource

    if os.environ.get(MODEL_KEY_FILE_ENV, "").strip():
        return KeySource.from_file(os.environ[MODEL_KEY_FILE_ENV].strip(), required=False)
    if os.environ.get(MODEL_KEY_ENV, "").strip():
        return KeySource.from_env(MODEL_KEY_ENV, required=False)
    return None


def _load_graph(
    path: str | os.PathLike[str],
    weights: str | os.PathLike[str] | None,
    key: KeyLike | None,
    verify_signature: Any,
    verify: bool | None,
) -> Graph:
    """Through load_graph, except .ecnn files opened with a key, a signature check or ``verify``."""
    protected = key is not None or verify_signature is not None
    chosen = key if key is not None else environment_key()
    if chosen is None and verify_signature is None and verify is None:
        return load_graph(path, weights)
    regular_file_size(path)
    if sniff_format(Path(path)) != "ecnn":
        if protected:
            raise ConfigurationError(f"{path}: key= and verify_signature= apply to .ecnn files only")
        return load_graph(path, weights)
    if weights is not None:
        raise ModelFormatError(f"{path}: .ecnn files carry their weights; do not pass weights=")
    from edgecnn.format import load_ecnn

    return load_ecnn(path, key=chosen, verify_signature=verify_signature, verify=verify)
