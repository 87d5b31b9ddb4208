"""What a benchmark ran on: CPU, cores, and the versions of everything that was timed."""

from __future__ import annotations

import os
import platform
import re
import sys
from pathlib import Path


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU's marketing name (Linux), else platform.processor()."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        text = ""
    match = re.search(r"^model name\s*:\s*(.+)$", text, re.MULTILINE)
    return match.group(1).strip() if match else (platform.processor() or platform.machine() or "unknown")


def simd_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> list[str]:
    """The vector extensions that matter to float32 kernels (AVX2, FMA, AVX-512 ...)."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return []
    match = re.search(r"^flags\s*:\s*(.+)$", text, re.MULTILINE)
    flags = set(match.group(1).split()) if match else set()
    wanted = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile")
    return [f for f in wanted if f in flags]


def blas_library() -> str:
    """numpy's BLAS (name, version, threading layer and, where it says, the CPU its kernels were
    chosen for: OpenBLAS runs older kernels where OPENBLAS_CORETYPE names an older CPU), as
    threadpoolctl sees it."""
    import numpy  # noqa: F401  (loads the BLAS so threadpoolctl can see it)
    from threadpoolctl import threadpool_info

    for info in threadpool_info():
        if info.get("user_api") == "blas":
            kernels = f", {info['architecture']} kernels" if info.get("architecture") else ""
            return (
                f"{info.get('internal_api')} {info.get('version')} "
                f"({info.get('threading_layer', '?')} threads{kernels})"
            )
    return "unknown"


def load_average() -> list[float]:
    """1, 5 and 15-minute load averages: other work on the machine while the benchmark ran."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def machine_info(engine_versions: dict[str, str]) -> dict[str, object]:
    """A JSON-able description of this machine and software."""
    import numpy

    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 1
    return {
        "cpu": cpu_model(),
        "simd": simd_flags(),
        "logical_cpus": os.cpu_count() or 1,
        "usable_cpus": usable,
        "os": f"{platform.system()} {platform.release()}",
        "python": sys.version.split()[0],
        "numpy": numpy.__version__,
        "blas": blas_library(),
        "engines": dict(engine_versions),
        "load_average": load_average(),
    }
