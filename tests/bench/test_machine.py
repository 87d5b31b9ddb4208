"""The machine description every bench result carries: caches and cores from a made-up sysfs tree
(and this machine's, which must at least be consistent), the ISA numba compiles for."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgecnn.bench import machine
from edgecnn.bench.machine import (
    cache_sizes,
    compiled_features,
    machine_info,
    machine_summary,
    parse_size,
    physical_cores,
    vector_bits,
)


def fake_sysfs(root: Path, caches: list[tuple[int, str, str]], cores: list[tuple[int, int]]) -> Path:
    """cpu0's cache indices (level, type, size) and one topology per CPU (package, core)."""
    for i, (level, kind, size) in enumerate(caches):
        index = root / "cpu0" / "cache" / f"index{i}"
        index.mkdir(parents=True)
        (index / "level").write_text(f"{level}\n")
        (index / "type").write_text(f"{kind}\n")
        (index / "size").write_text(f"{size}\n")
    for cpu, (package, core) in enumerate(cores):
        topology = root / f"cpu{cpu}" / "topology"
        topology.mkdir(parents=True)
        (topology / "physical_package_id").write_text(f"{package}\n")
        (topology / "core_id").write_text(f"{core}\n")
    return root


def test_parse_size() -> None:
    assert parse_size("32K\n") == 32 << 10 and parse_size("1M") == 1 << 20 and parse_size("512") == 512
    assert parse_size("") is None and parse_size("lots") is None


def test_caches_and_cores_from_sysfs(tmp_path: Path) -> None:
    root = fake_sysfs(
        tmp_path,
        [(1, "Data", "48K"), (1, "Instruction", "32K"), (2, "Unified", "2048K"), (3, "Unified", "105M")],
        [(0, 0), (0, 0), (0, 1), (0, 1)],  # two cores with two hyperthreads each
    )
    assert cache_sizes(root) == {"L1d": 48 << 10, "L2": 2 << 20, "L3": 105 << 20}
    assert physical_cores(root) == 2


def test_levels_sysfs_lacks_come_from_sysconf_else_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = fake_sysfs(tmp_path, [(1, "Data", "32K")], [])
    monkeypatch.setattr(machine, "_sysconf_caches", lambda: {"L1d": 1, "L2": 1 << 20})
    assert cache_sizes(root) == {"L1d": 32 << 10, "L2": 1 << 20, "L3": None}
    monkeypatch.setattr(machine, "_sysconf_caches", dict)
    assert cache_sizes(tmp_path / "absent") == {"L1d": None, "L2": None, "L3": None}
    assert physical_cores(tmp_path / "absent") is None


def test_isa_is_what_numba_compiles_for(monkeypatch: pytest.MonkeyPatch) -> None:
    from numba.core import config

    monkeypatch.setattr(config, "CPU_NAME", "skylake-avx512", raising=False)
    monkeypatch.setattr(config, "CPU_FEATURES", "+avx,+avx2,+fma,+avx512f,-avx512vnni,+sse4.2", raising=False)
    name, isa = compiled_features()
    assert name == "skylake-avx512" and isa == ["sse4.2", "avx", "avx2", "fma", "avx512f"]
    assert vector_bits(isa) == 512 and vector_bits(["avx", "avx2"]) == 256 and vector_bits(["neon"]) == 128


def test_this_machine() -> None:
    info = machine_info({"edgecnn": "0.1.0"})
    assert info["engines"] == {"edgecnn": "0.1.0"} and int(info["usable_cpus"]) >= 1  # type: ignore[call-overload]
    assert info["vector_bits"] in (128, 256, 512) and isinstance(info["isa"], list) and info["llvm_cpu"]
    caches = info["caches"]
    assert isinstance(caches, dict) and set(caches) == {"L1d", "L2", "L3"}
    known = [size for size in caches.values() if size is not None]
    assert known == sorted(known)  # each level at least as large as the one before
    summary = machine_summary(info)
    assert str(info["cpu"]) in summary and f"{info['vector_bits']}-bit vectors" in summary
