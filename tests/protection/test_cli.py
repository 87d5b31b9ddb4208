"""`edgecnn keygen`, and protected outputs of `convert` and `compress`, loaded back."""

from __future__ import annotations

import stat
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import edgecnn
from edgecnn.cli.app import app
from edgecnn.errors import ModelFormatError
from edgecnn.format import read_header

FACE_ONNX = Path(str(resources.files("edgecnn") / "data" / "simplecnn" / "face_binary_cls.onnx"))


def invoke(*args: object) -> object:
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    model_key, signing = tmp_path / "model.key", tmp_path / "signing.key"
    assert invoke("keygen", model_key).exit_code == 0  # type: ignore[attr-defined]
    assert invoke("keygen", "--signing", signing).exit_code == 0  # type: ignore[attr-defined]
    return model_key, signing


def test_keygen_writes_owner_only_keys_and_never_replaces_silently(
    tmp_path: Path, keys: tuple[Path, Path]
) -> None:
    model_key, signing = keys
    assert len(model_key.read_text().strip()) == 64
    assert b"PRIVATE KEY" in signing.read_bytes()
    assert b"PUBLIC KEY" in Path(f"{signing}.pub").read_bytes()
    for path in (model_key, signing):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    before = model_key.read_bytes()
    result = invoke("keygen", model_key)
    assert result.exit_code == 1 and "--force" in result.output  # type: ignore[attr-defined]
    assert model_key.read_bytes() == before
    model_key.chmod(0o644)
    assert invoke("keygen", "--force", model_key).exit_code == 0  # type: ignore[attr-defined]
    assert model_key.read_bytes() != before and stat.S_IMODE(model_key.stat().st_mode) == 0o600


def test_convert_encrypts_and_signs_and_the_model_runs_the_same(
    tmp_path: Path, keys: tuple[Path, Path]
) -> None:
    model_key, signing = keys
    out = tmp_path / "face.ecnn"
    result = invoke("convert", FACE_ONNX, "-o", out, "--encrypt", model_key, "--sign", signing)
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    assert [s.name for s in read_header(out).sections][-2:] == ["ENCRYPTION", "SIGNATURE"]
    x = np.random.default_rng(0).random((1, 3, 128, 128), np.float32)
    protected = edgecnn.load(out, key=model_key, verify_signature=Path(f"{signing}.pub"))
    assert np.array_equal(protected(x), edgecnn.load(FACE_ONNX)(x))
    with pytest.raises(ModelFormatError, match="encrypted"):
        edgecnn.load(out)
    back = tmp_path / "plain.ecnn"
    assert invoke("convert", out, "--key", model_key, "-o", back).exit_code == 0  # type: ignore[attr-defined]
    assert np.array_equal(edgecnn.load(back)(x), protected(x))
    result = invoke("convert", FACE_ONNX, "-o", tmp_path / "r.bin", "--encrypt", model_key)
    assert result.exit_code != 0 and "only .ecnn outputs" in result.output  # type: ignore[attr-defined]


def test_compress_writes_an_encrypted_signed_output(tmp_path: Path, keys: tuple[Path, Path]) -> None:
    model_key, signing = keys
    out = tmp_path / "small.ecnn"
    common = ["--quantize", "fp16", "--iterations", "1", "--samples", "1", "--threads", "1"]
    result = invoke("compress", FACE_ONNX, *common, "--encrypt", model_key, "--sign", signing, "-o", out)
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    assert read_header(out).encrypted
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".ecnn"] == ["small.ecnn"]
    loaded = edgecnn.load(out, key=model_key, verify_signature=Path(f"{signing}.pub"))
    assert {str(a.dtype) for a in loaded.graph.initializers.values()} == {"float32"}  # fp16 decoded
