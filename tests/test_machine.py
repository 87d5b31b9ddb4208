"""The machine description in edgecnn.devices: what `edgecnn devices` and bench reports name, and
what keys the kernel tuning cache."""

from __future__ import annotations

from pathlib import Path

from edgecnn import devices


def test_cpu_fields_from_cpuinfo(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        "processor\t: 0\nvendor_id\t: TestVendor\nmodel name\t: Test CPU 9000\nflags\t\t: fpu sse4_2 avx2 fma\n"
        "processor\t: 1\nmodel name\t: Other CPU\n"
    )
    assert devices.cpu_model(cpuinfo) == "Test CPU 9000"
    assert devices.cpu_vendor(cpuinfo) == "TestVendor"
    assert devices.simd_flags(cpuinfo) == ["sse4_2", "avx2", "fma"]


def test_arm_cpuinfo_names_the_model(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        "processor\t: 0\nCPU implementer\t: 0x41\n\nHardware\t: BCM2835\nModel\t: Raspberry Pi 4\n"
    )
    assert devices.cpu_model(cpuinfo) == "Raspberry Pi 4"
    assert devices.cpu_vendor(cpuinfo) == "0x41"
    assert devices.simd_flags(cpuinfo) == []


def test_without_cpuinfo_the_platform_answers(tmp_path: Path) -> None:
    assert devices.cpu_model(tmp_path / "absent")
    assert devices.cpu_vendor(tmp_path / "absent") == ""


def test_fingerprint_is_a_stable_hash_of_the_description() -> None:
    description = devices.machine_description()
    assert devices.cpu_model() in description and f"{devices.available_cores()} cores" in description
    assert devices.machine_fingerprint() == devices.machine_fingerprint()
    assert len(devices.machine_fingerprint()) == 16
