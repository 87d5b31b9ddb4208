"""Signed .ecnn files: an edit that recomputes every CRC and the SHA-256 passes verify=True but not
the signature; every byte before the digest is signed."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from ecnn_helpers import reseal

import edgecnn
from edgecnn.errors import ConfigurationError, ModelFormatError
from edgecnn.format import load_ecnn, read_header, save_ecnn
from edgecnn.format.keys import generate_signing_key
from edgecnn.format.layout import HEADER, SECTION_ENTRY, SectionKind
from edgecnn.format.signature import SIGNATURE_FAILED
from edgecnn.ir.graph import Graph


def signed(tmp_path: Path, graph: Graph, private_pem: bytes, **kwargs: object) -> Path:
    path = tmp_path / "signed.ecnn"
    save_ecnn(graph, path, sign=private_pem, **kwargs)  # type: ignore[arg-type]
    return path


def _entry(raw: bytes, kind: SectionKind) -> tuple[int, int, int]:
    """(table position, offset, length) of the section of ``kind``."""
    count = struct.unpack_from("<I", raw, 12)[0]
    for i in range(count):
        at = HEADER.size + i * SECTION_ENTRY.size
        entry_kind, _, offset, length, _, _ = SECTION_ENTRY.unpack_from(raw, at)
        if entry_kind == kind:
            return at, offset, length
    raise AssertionError(f"no {kind.name} section")


def test_round_trip_with_a_key_file_and_pem_bytes(
    tmp_path: Path, graph: Graph, signing_pair: tuple[bytes, bytes]
) -> None:
    private_pem, public_pem = signing_pair
    key_file = tmp_path / "signing.key"
    key_file.write_bytes(private_pem)
    public_file = tmp_path / "signing.key.pub"
    public_file.write_bytes(public_pem)
    path = signed(tmp_path, graph, key_file)  # type: ignore[arg-type]
    assert read_header(path).minor == 3
    assert [s.name for s in read_header(path).sections][-1] == "SIGNATURE"
    for public in (public_pem, public_file, str(public_file)):
        loaded = load_ecnn(path, verify_signature=public, verify=True)
        assert loaded.name == graph.name
    assert edgecnn.load(path, verify_signature=public_file).graph.name == graph.name
    assert load_ecnn(path).name == graph.name  # a reader that does not ask does not check


def test_recomputed_checksums_do_not_pass_the_signature(
    tmp_path: Path, graph: Graph, signing_pair: tuple[bytes, bytes]
) -> None:
    """The issue's attack: change a weight, recompute the tensor, section and header CRCs and the SHA-256."""
    private_pem, public_pem = signing_pair
    path = signed(tmp_path, graph, private_pem)
    raw = bytearray(path.read_bytes())
    _, data_offset, _ = _entry(bytes(raw), SectionKind.DATA)
    original = load_ecnn(path)
    tensors = original.initializers
    first = next(iter(tensors))
    raw[data_offset : data_offset + 4] = np.float32(1e6).tobytes()  # the first blob's first element
    forged = _recompute_all(bytes(raw), first)
    path.write_bytes(forged)
    assert load_ecnn(path, verify=True).initializers[first].reshape(-1)[0] == np.float32(1e6)
    with pytest.raises(ModelFormatError, match=SIGNATURE_FAILED):
        load_ecnn(path, verify_signature=public_pem)


def _recompute_all(raw: bytes, tensor: str) -> bytes:
    """Fix the edited tensor's CRC in the GRAPH JSON, every section CRC, the header CRC and the digest."""
    import json

    out = bytearray(raw)
    _, graph_offset, graph_length = _entry(raw, SectionKind.GRAPH)
    _, data_offset, _ = _entry(raw, SectionKind.DATA)
    document = json.loads(raw[graph_offset : graph_offset + graph_length])
    for entry in document["tensors"]:
        if entry["name"] == tensor:
            start = data_offset + entry["offset"]
            entry["crc32"] = zlib.crc32(raw[start : start + entry["nbytes"]])
    text = json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()
    assert len(text) <= graph_length
    text = text + b" " * (graph_length - len(text))  # JSON allows trailing whitespace
    out[graph_offset : graph_offset + graph_length] = text
    for kind in (SectionKind.GRAPH, SectionKind.DATA):
        at, offset, length = _entry(raw, kind)
        values = list(SECTION_ENTRY.unpack_from(out, at))
        values[4] = zlib.crc32(out[offset : offset + length])
        out[at : at + SECTION_ENTRY.size] = SECTION_ENTRY.pack(*values)
    return reseal(bytes(out))


def test_every_signed_byte_is_checked(
    tmp_path: Path, graph: Graph, signing_pair: tuple[bytes, bytes]
) -> None:
    private_pem, public_pem = signing_pair
    raw = signed(tmp_path, graph, private_pem).read_bytes()
    _, sig_offset, sig_length = _entry(raw, SectionKind.SIGNATURE)
    assert sig_offset + sig_length == len(raw) - 32
    damaged = tmp_path / "damaged.ecnn"
    regions = {
        "header and table": range(0, HEADER.size + 3 * SECTION_ENTRY.size),
        "sections and padding": range(HEADER.size + 3 * SECTION_ENTRY.size, sig_offset, 17),
        "public key": range(sig_offset, sig_offset + 32),
        "signature": range(sig_offset + 32, sig_offset + 96),
    }
    for region, positions in regions.items():
        for at in positions:
            out = bytearray(raw)
            out[at] ^= 0x10
            edited = reseal(bytes(out))  # the header CRC and digest recomputed
            if edited == raw:
                continue  # the edit hit the header CRC, which resealing put back
            damaged.write_bytes(edited)
            with pytest.raises(ModelFormatError) as caught:
                load_ecnn(damaged, verify_signature=public_pem, verify=False)
            assert len(str(caught.value)) < 300, region


def test_wrong_key_unsigned_file_and_bad_key_files(
    tmp_path: Path, graph: Graph, signing_pair: tuple[bytes, bytes]
) -> None:
    private_pem, _ = signing_pair
    path = signed(tmp_path, graph, private_pem)
    _, other_public = generate_signing_key()
    with pytest.raises(ModelFormatError, match=SIGNATURE_FAILED):
        load_ecnn(path, verify_signature=other_public)
    plain = tmp_path / "plain.ecnn"
    save_ecnn(graph, plain)
    with pytest.raises(ModelFormatError, match="not signed"):
        load_ecnn(plain, verify_signature=other_public)
    with pytest.raises(ConfigurationError, match="not an Ed25519 public key"):
        load_ecnn(path, verify_signature=b"-----BEGIN PUBLIC KEY-----\nnope\n-----END PUBLIC KEY-----\n")
    with pytest.raises(ConfigurationError, match="private key"):
        save_ecnn(graph, tmp_path / "x.ecnn", sign=other_public)
    assert not (tmp_path / "x.ecnn").exists()


def test_encrypted_and_signed(
    tmp_path: Path, graph: Graph, model_key: bytes, signing_pair: tuple[bytes, bytes]
) -> None:
    private_pem, public_pem = signing_pair
    path = signed(tmp_path, graph, private_pem, encrypt=model_key)
    assert [s.name for s in read_header(path).sections] == ["GRAPH", "DATA", "ENCRYPTION", "SIGNATURE"]
    loaded = load_ecnn(path, key=model_key, verify_signature=public_pem, verify=True)
    assert loaded.name == graph.name
    raw = bytearray(path.read_bytes())
    _, sig_offset, _ = _entry(bytes(raw), SectionKind.SIGNATURE)
    raw[sig_offset + 40] ^= 1
    path.write_bytes(reseal(bytes(raw)))
    with pytest.raises(ModelFormatError, match=SIGNATURE_FAILED):
        load_ecnn(path, key=model_key, verify_signature=public_pem)
