"""What a benchmark ran on: CPU, the vector code numba compiles for, caches, cores, and the versions
of everything that was timed. A ratio measured on one CPU says little about another, so every
bench result carries these facts beside its numbers."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

from edgecnn.devices import available_cores, blas_library, cpu_model, simd_flags
from edgecnn.limits import format_bytes

SYSFS_CPU = Path("/sys/devices/system/cpu")

ISA_FEATURES = (
    "sse4.2",
    "avx",
    "avx2",
    "fma",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512vnni",
    "avx512bf16",
    "avx512fp16",
    "avxvnni",
    "amx-tile",
    "neon",
    "sve",
    "sve2",
)
"""LLVM feature names that decide how wide and how fast compiled float32/int8 loops are."""

CACHE_LEVELS = {"L1d": (1, "Data"), "L2": (2, "Unified"), "L3": (3, "Unified")}
"""Cache name -> (level, type) as Linux's sysfs reports them."""

SYSCONF_CACHES = {"L1d": "SC_LEVEL1_DCACHE_SIZE", "L2": "SC_LEVEL2_CACHE_SIZE", "L3": "SC_LEVEL3_CACHE_SIZE"}
SYSCTL_CACHES = {"L1d": "hw.l1dcachesize", "L2": "hw.l2cachesize", "L3": "hw.l3cachesize"}


def load_average() -> list[float]:
    """1, 5 and 15-minute load averages: other work on the machine while the benchmark ran."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def compiled_features() -> tuple[str, list[str]]:
    """(LLVM CPU name, the ISA_FEATURES enabled) that numba compiles for: NUMBA_CPU_NAME and
    NUMBA_CPU_FEATURES where set, else the host's, which is what the kernels' vector code uses."""
    import llvmlite.binding as llvm
    from numba.core import config
    from numba.core.codegen import get_host_cpu_features

    # set from the environment at numba's start-up, so absent from what mypy reads of numba.config
    name: str | None = config.CPU_NAME  # type: ignore[attr-defined]
    chosen: str | None = config.CPU_FEATURES  # type: ignore[attr-defined]
    features = chosen if chosen is not None else get_host_cpu_features()
    enabled = {f[1:] for f in features.split(",") if f.startswith("+")}
    if platform.machine().lower() in ("arm64", "aarch64"):
        enabled.add("neon")  # every AArch64 CPU has it; LLVM lists it under other names
    return name or llvm.get_host_cpu_name(), [f for f in ISA_FEATURES if f in enabled]


def vector_bits(isa: list[str]) -> int:
    """The widest float32 vector the compiled code uses: 512 (AVX-512F), 256 (AVX), else 128."""
    if "avx512f" in isa:
        return 512
    return 256 if "avx" in isa else 128


def parse_size(text: str) -> int | None:
    """sysfs's cache size ("32K", "1M", "512") in bytes; None when it is not one."""
    text = text.strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    digits = text[:-1] if scale > 1 else text
    return int(digits) * scale if digits.isdigit() else None


def _sysfs_caches(root: Path) -> dict[str, int]:
    """Per-core cache sizes of cpu0 from Linux's sysfs (one L1d and L2 per core, L3 shared)."""
    found: dict[str, int] = {}
    for index in sorted(root.glob("cpu0/cache/index*")):
        try:
            level = int((index / "level").read_text())
            kind = (index / "type").read_text().strip()
            size = parse_size((index / "size").read_text())
        except (OSError, ValueError):
            continue
        for name, wanted in CACHE_LEVELS.items():
            if (level, kind) == wanted and size:
                found.setdefault(name, size)
    return found


def _sysconf_caches() -> dict[str, int]:
    """glibc's answer (sysconf), where it knows the sizes."""
    found: dict[str, int] = {}
    for name, key in SYSCONF_CACHES.items():
        if key in os.sysconf_names:
            try:
                size = os.sysconf(key)
            except (OSError, ValueError):
                continue
            if size > 0:
                found[name] = size
    return found


def _sysctl_caches() -> dict[str, int]:
    """macOS's answer (sysctl hw.*cachesize)."""
    found: dict[str, int] = {}
    for name, key in SYSCTL_CACHES.items():
        try:
            text = subprocess.run(
                ["sysctl", "-n", key], capture_output=True, text=True, timeout=2, check=True
            ).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        if text.strip().isdigit() and int(text) > 0:
            found[name] = int(text)
    return found


def cache_sizes(root: Path = SYSFS_CPU) -> dict[str, int | None]:
    """L1d, L2 and L3 sizes in bytes (per core for L1d/L2, as one core sees them), from sysfs on
    Linux, else sysconf, else sysctl on macOS; None for a level no source reports."""
    found = _sysfs_caches(root)
    for fallback in (_sysconf_caches, _sysctl_caches if sys.platform == "darwin" else None):
        if fallback is not None and len(found) < len(CACHE_LEVELS):
            found = {**fallback(), **found}
    return {name: found.get(name) for name in CACHE_LEVELS}


def physical_cores(root: Path = SYSFS_CPU) -> int | None:
    """Distinct (package, core) pairs among the online CPUs in sysfs; None where sysfs does not say
    (SMT siblings count once: two hyperthreads share one core's vector units)."""
    cores = set()
    for topology in root.glob("cpu[0-9]*/topology"):
        try:
            cores.add(
                (
                    (topology / "physical_package_id").read_text().strip(),
                    (topology / "core_id").read_text().strip(),
                )
            )
        except OSError:
            continue
    return len(cores) or None


def machine_summary(machine: dict[str, object]) -> str:
    """One line: CPU, vector ISA, caches and cores, as the console and the markdown print them."""
    caches = machine.get("caches")
    cache_text = (
        ", ".join(f"{name} {'?' if size is None else format_bytes(size)}" for name, size in caches.items())
        if isinstance(caches, dict)
        else "caches not recorded"
    )
    isa = machine.get("isa")
    isa_text = "/".join(isa) if isinstance(isa, list) and isa else "ISA not recorded"
    cores = machine.get("physical_cores") or "?"
    return (
        f"{machine.get('cpu')} ({machine.get('llvm_cpu', '?')}; {machine.get('vector_bits', '?')}-bit vectors: "
        f"{isa_text}); {cache_text}; {cores} cores, {machine.get('usable_cpus')} usable of "
        f"{machine.get('logical_cpus')} logical CPUs"
    )


def machine_info(engine_versions: dict[str, str]) -> dict[str, object]:
    """A JSON-able description of this machine and software."""
    import numpy

    llvm_cpu, isa = compiled_features()
    return {
        "cpu": cpu_model(),
        "simd": simd_flags(),
        "llvm_cpu": llvm_cpu,
        "isa": isa,
        "vector_bits": vector_bits(isa),
        "caches": cache_sizes(),
        "physical_cores": physical_cores(),
        "logical_cpus": os.cpu_count() or 1,
        "usable_cpus": available_cores(),
        "os": f"{platform.system()} {platform.release()}",
        "python": sys.version.split()[0],
        "numpy": numpy.__version__,
        "blas": blas_library(),
        "engines": dict(engine_versions),
        "load_average": load_average(),
    }
