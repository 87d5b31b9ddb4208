"""What a benchmark ran on: CPU, cores, and the versions of everything that was timed."""

from __future__ import annotations

import os
import platform
import sys

from edgecnn.devices import available_cores, blas_library, cpu_model, simd_flags


def load_average() -> list[float]:
    """1, 5 and 15-minute load averages: other work on the machine while the benchmark ran."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def machine_info(engine_versions: dict[str, str]) -> dict[str, object]:
    """A JSON-able description of this machine and software."""
    import numpy

    return {
        "cpu": cpu_model(),
        "simd": simd_flags(),
        "logical_cpus": os.cpu_count() or 1,
        "usable_cpus": available_cores(),
        "os": f"{platform.system()} {platform.release()}",
        "python": sys.version.split()[0],
        "numpy": numpy.__version__,
        "blas": blas_library(),
        "engines": dict(engine_versions),
        "load_average": load_average(),
    }
