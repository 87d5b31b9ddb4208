"""Encrypted .ecnn files: round trips through every key source, and one clear error, that leaks
nothing, for a wrong key and for a change to any byte the encryption covers."""

from __future__ import annotations

import hashlib
import os
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from ecnn_helpers import assert_graphs_equal, reseal

import edgecnn
from edgecnn.errors import ConfigurationError, ModelFormatError
from edgecnn.format import load_ecnn, read_header, save_ecnn
from edgecnn.format.keys import KeySource, model_key_text
from edgecnn.format.layout import FLAG_ENCRYPTED, HEADER, SECTION_ENTRY, SectionKind
from edgecnn.format.sealing import DECRYPT_FAILED, TAG_BYTES
from edgecnn.ir.graph import Graph
from edgecnn.model import Model


def saved(tmp_path: Path, graph: Graph, key: bytes, name: str = "enc.ecnn", **kwargs: object) -> Path:
    path = tmp_path / name
    save_ecnn(graph, path, encrypt=key, **kwargs)  # type: ignore[arg-type]
    return path


def test_round_trip_with_every_key_source(
    tmp_path: Path, graph: Graph, model_key: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = saved(tmp_path, graph, model_key, storage={"fc.w": "csr:int8+zlib", "conv.w": "float16"})
    header = read_header(path)
    assert header.flags & FLAG_ENCRYPTED and header.minor == 3
    key_file = tmp_path / "model.key"
    key_file.write_bytes(model_key_text(model_key))
    monkeypatch.setenv("TEST_MODEL_KEY", model_key.hex())
    expected = load_ecnn(saved(tmp_path, graph, model_key, "ref.ecnn"), key=model_key)
    for key in (
        model_key,
        key_file,
        str(key_file),
        lambda: model_key,
        KeySource.from_env("TEST_MODEL_KEY"),
        KeySource.from_file(key_file),
    ):
        loaded = load_ecnn(path, key=key, verify=True)
        assert [n.name for n in loaded.nodes] == [n.name for n in graph.nodes]
    assert_graphs_equal(graph, expected)
    for array in expected.initializers.values():
        assert not array.flags.writeable
        assert array.ctypes.data % 64 == 0


def test_model_save_and_edgecnn_load_run_the_same(tmp_path: Path, graph: Graph, model_key: bytes) -> None:
    model = Model(graph)
    path = tmp_path / "m.ecnn"
    model.save(path, encrypt=model_key)
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)
    loaded = edgecnn.load(path, key=model_key)
    assert np.array_equal(loaded(x), model(x))


def test_environment_key_is_used_for_encrypted_files_only(
    tmp_path: Path, graph: Graph, model_key: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    encrypted = saved(tmp_path, graph, model_key)
    plain = tmp_path / "plain.ecnn"
    save_ecnn(graph, plain)
    key_file = tmp_path / "k"
    key_file.write_bytes(model_key_text(model_key))
    monkeypatch.setenv("EDGECNN_MODEL_KEY_FILE", str(key_file))
    assert edgecnn.load(encrypted).graph.name == graph.name
    assert edgecnn.load(plain).graph.name == graph.name  # not required: a plain file still loads
    monkeypatch.delenv("EDGECNN_MODEL_KEY_FILE")
    monkeypatch.setenv("EDGECNN_MODEL_KEY", model_key.hex())
    assert edgecnn.load(encrypted).graph.name == graph.name


def test_missing_key_wrong_key_and_key_for_a_plain_file(
    tmp_path: Path, graph: Graph, model_key: bytes
) -> None:
    path = saved(tmp_path, graph, model_key)
    with pytest.raises(ModelFormatError, match="encrypted: pass its model key"):
        load_ecnn(path)
    with pytest.raises(ModelFormatError, match=DECRYPT_FAILED) as wrong:
        load_ecnn(path, key=os.urandom(32))
    assert model_key.hex() not in str(wrong.value)
    plain = tmp_path / "plain.ecnn"
    save_ecnn(graph, plain)
    with pytest.raises(ModelFormatError, match="not encrypted"):
        load_ecnn(plain, key=model_key)
    with pytest.raises(ConfigurationError, match=r"apply to \.ecnn files only"):
        onnx_path = tmp_path / "m.onnx"
        onnx_path.write_bytes(b"\x08\x07")
        edgecnn.load(onnx_path, key=model_key)


def test_bad_keys_are_configuration_errors(tmp_path: Path, graph: Graph) -> None:
    bad = tmp_path / "bad.key"
    bad.write_text("not a key\n")
    for key in (bad, b"short", lambda: "text", tmp_path / "missing.key", 42):
        with pytest.raises(ConfigurationError):
            save_ecnn(graph, tmp_path / "x.ecnn", encrypt=key)  # type: ignore[arg-type]
    assert not (tmp_path / "x.ecnn").exists()


def test_a_failing_key_callback_is_one_model_format_error(
    tmp_path: Path, graph: Graph, model_key: bytes
) -> None:
    path = saved(tmp_path, graph, model_key)
    secret = model_key.hex()

    def keystore() -> bytes:
        raise RuntimeError(f"keystore locked, last key {secret}")

    for load in (lambda: load_ecnn(path, key=keystore), lambda: edgecnn.load(path, key=keystore)):
        with pytest.raises(ModelFormatError, match=r"the key callback failed \(RuntimeError\)") as failed:
            load()
        assert secret not in str(failed.value)
        assert isinstance(failed.value.__cause__, RuntimeError)
    with pytest.raises(ModelFormatError, match="key callback failed"):
        save_ecnn(graph, tmp_path / "y.ecnn", encrypt=keystore)
    assert not (tmp_path / "y.ecnn").exists()


def test_every_save_uses_a_fresh_salt_and_no_plaintext_reaches_the_file(
    tmp_path: Path, graph: Graph, model_key: bytes
) -> None:
    first = saved(tmp_path, graph, model_key, "a.ecnn").read_bytes()
    second = saved(tmp_path, graph, model_key, "b.ecnn").read_bytes()
    assert len(first) == len(second) and first[:64] != second[:64]  # CRCs of different ciphertexts
    body = HEADER.size + 3 * SECTION_ENTRY.size
    common = sum(x == y for x, y in zip(first[body:], second[body:], strict=True))
    assert common < 0.1 * (len(first) - body) + 2000  # padding only, no shared keystream
    for text in (b"small_cnn", b"conv.w", b"Gemm", b"producer"):
        assert text not in first
    weights = np.asarray(graph.initializers["fc.w"]).tobytes()
    assert weights[:16] not in first


def _regions(raw: bytes) -> dict[str, list[int]]:
    """Byte positions of each region of an encrypted file, from its table."""
    count = struct.unpack_from("<I", raw, 12)[0]
    regions: dict[str, list[int]] = {
        "header": list(range(HEADER.size)),
        "section table": list(range(HEADER.size, HEADER.size + count * SECTION_ENTRY.size)),
    }
    for i in range(count):
        kind, _, offset, length, _, _ = SECTION_ENTRY.unpack_from(raw, HEADER.size + i * SECTION_ENTRY.size)
        name = SectionKind(kind).name
        if kind == SectionKind.ENCRYPTION:
            regions["encryption record"] = list(range(offset, offset + length))
        elif kind in (SectionKind.GRAPH, SectionKind.DATA):
            regions[f"{name} ciphertext"] = list(range(offset, offset + length - TAG_BYTES, 13))
            regions[f"{name} tag"] = list(range(offset + length - TAG_BYTES, offset + length))
    return regions


def test_a_change_to_any_covered_byte_is_one_clear_error(
    tmp_path: Path, graph: Graph, model_key: bytes
) -> None:
    raw = saved(tmp_path, graph, model_key).read_bytes()
    damaged = tmp_path / "damaged.ecnn"
    regions = _regions(raw)
    assert set(regions) >= {"header", "section table", "encryption record", "GRAPH tag", "DATA ciphertext"}
    for region, positions in regions.items():
        for at in positions:
            for resealed in (False, True):  # as damage, and as an edit that recomputes every checksum
                out = bytearray(raw)
                out[at] ^= 0x04
                edited = reseal(_fix_section_crcs(bytes(out))) if resealed else bytes(out)
                if edited == raw:
                    continue  # the edit hit a CRC field that resealing put back
                damaged.write_bytes(edited)
                with pytest.raises(ModelFormatError) as caught:
                    load_ecnn(damaged, key=model_key)
                message = str(caught.value)
                assert len(message) < 400, f"{region} byte {at}"
                assert model_key.hex() not in message


def _fix_section_crcs(raw: bytes) -> bytes:
    """Recompute every section's CRC-32 in the table (an attacker's edit, not damage)."""
    out = bytearray(raw)
    count = min(struct.unpack_from("<I", out, 12)[0], 8)
    for i in range(count):
        at = HEADER.size + i * SECTION_ENTRY.size
        kind, flags, offset, length, _, reserved = SECTION_ENTRY.unpack_from(out, at)
        if offset + length <= len(out):
            crc = zlib.crc32(out[offset : offset + length])
            out[at : at + SECTION_ENTRY.size] = SECTION_ENTRY.pack(kind, flags, offset, length, crc, reserved)
    return bytes(out)


def test_padding_and_digest_are_checked_by_verify(tmp_path: Path, graph: Graph, model_key: bytes) -> None:
    raw = saved(tmp_path, graph, model_key).read_bytes()
    covered = {at for positions in _regions(raw).values() for at in positions}
    uncovered = [at for at in range(len(raw)) if at not in covered and not _in_ciphertext(raw, at)]
    assert uncovered, "expected padding and the digest outside the encrypted regions"
    damaged = tmp_path / "damaged.ecnn"
    for at in uncovered:
        out = bytearray(raw)
        out[at] ^= 0x01
        damaged.write_bytes(bytes(out))
        with pytest.raises(ModelFormatError, match="SHA-256"):
            load_ecnn(damaged, key=model_key, verify=True)


def _in_ciphertext(raw: bytes, at: int) -> bool:
    count = struct.unpack_from("<I", raw, 12)[0]
    for i in range(count):
        _, _, offset, length, _, _ = SECTION_ENTRY.unpack_from(raw, HEADER.size + i * SECTION_ENTRY.size)
        if offset <= at < offset + length:
            return True
    return False


def test_swapped_sections_fail(tmp_path: Path, graph: Graph, model_key: bytes) -> None:
    """Ciphertext moved from another file under the same key does not decrypt (salt and nonce differ)."""
    a = saved(tmp_path, graph, model_key, "a.ecnn").read_bytes()
    b = saved(tmp_path, graph, model_key, "b.ecnn").read_bytes()
    _, _, offset, length, _, _ = SECTION_ENTRY.unpack_from(a, HEADER.size + SECTION_ENTRY.size)
    mixed = bytearray(a)
    mixed[offset : offset + length] = b[offset : offset + length]
    out = tmp_path / "mixed.ecnn"
    out.write_bytes(reseal(_fix_section_crcs(bytes(mixed))))
    with pytest.raises(ModelFormatError, match=DECRYPT_FAILED):
        load_ecnn(out, key=model_key)
    assert hashlib.sha256(a).digest() != hashlib.sha256(b).digest()


def test_missing_cryptography_names_the_extra(
    tmp_path: Path, graph: Graph, model_key: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib

    real = importlib.import_module

    def without_cryptography(name: str, package: str | None = None) -> object:
        if name.startswith("cryptography"):
            raise ImportError(f"No module named {name!r}")
        return real(name, package)

    path = saved(tmp_path, graph, model_key)
    monkeypatch.setattr(importlib, "import_module", without_cryptography)
    with pytest.raises(ConfigurationError, match=r"pip install 'edgecnn\[crypto\]'"):
        load_ecnn(path, key=model_key)
    with pytest.raises(ConfigurationError, match=r"edgecnn\[crypto\]"):
        save_ecnn(graph, tmp_path / "x.ecnn", encrypt=model_key)


@pytest.mark.parametrize("total", [0, 1, 4095, 4096, 4097, 5 * 4096 + 17])
def test_chunk_boundaries_round_trip(total: int, model_key: bytes) -> None:
    """Pieces of every size, cut anywhere, seal into chunks that open to the same bytes."""
    from edgecnn.format.sealing import MIN_CHUNK, Opener, Sealer, sealed_length

    rng = np.random.default_rng(total)
    data = rng.integers(0, 255, total, dtype=np.uint8).tobytes()
    cuts = sorted(int(c) for c in rng.integers(0, total + 1, 5)) if total else []
    pieces = [data[a:b] for a, b in zip([0, *cuts], [*cuts, total], strict=True)]
    sealer = Sealer(model_key, MIN_CHUNK)
    stored = b"".join(sealer.seal(2, pieces, b"frame"))
    assert len(stored) == sealed_length(total, MIN_CHUNK)
    opener = Opener(model_key, sealer.record(), b"frame", "test")
    assert bytes(opener.open(2, memoryview(stored), opener.plain_length(len(stored), "DATA"))) == data
    with pytest.raises(ModelFormatError, match=DECRYPT_FAILED):
        Opener(model_key, sealer.record(), b"other frame", "test").open(2, memoryview(stored), total)


def test_truncated_or_extended_encrypted_files(tmp_path: Path, graph: Graph, model_key: bytes) -> None:
    raw = saved(tmp_path, graph, model_key).read_bytes()
    damaged = tmp_path / "damaged.ecnn"
    for edited in [raw[:keep] for keep in range(0, len(raw), 97)] + [raw + b"\0", raw[:-1]]:
        damaged.write_bytes(reseal(edited) if len(edited) > HEADER.size else edited)
        with pytest.raises(ModelFormatError):
            load_ecnn(damaged, key=model_key)
