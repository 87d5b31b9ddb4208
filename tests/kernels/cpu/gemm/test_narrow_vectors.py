"""The kernels' AVX2 code, tested on a machine with AVX-512.

The float block shape follows the vector registers numba compiles for (``microkernel.WIDE``), and
the int8 dot product takes `vpmaddubsw` with its fix-ups where there is no VNNI: on an AVX-512
host the rest of the suite runs the 8 x 32 blocks and `vpdpbusd` only. This test runs the kernel
tests whose code depends on the instruction set once more in a child process in which numba
compiles for an AVX2 CPU (``NUMBA_CPU_NAME`` / ``NUMBA_CPU_FEATURES``, into a cache of its own),
so that the code every AVX2 machine gets stays tested here too. On an AVX2 host the suite itself
runs them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from edgecnn.kernels.cpu.gemm.microkernel import WIDE

ROOT = Path(__file__).resolve().parents[4]
AVX2_FEATURES = ",".join(
    f"+{f}"
    for f in (
        "64bit", "avx", "avx2", "bmi", "bmi2", "cx16", "f16c", "fma", "lzcnt", "movbe", "popcnt",
        "sse", "sse2", "sse3", "sse4.1", "sse4.2", "ssse3", "xsave",
    )
)  # fmt: skip
SHAPE_DEPENDENT = (
    "tests/kernels/cpu/gemm/test_packed_gemm.py",
    "tests/kernels/cpu/conv/test_pointwise.py",
    "tests/kernels/cpu/conv/test_winograd.py",
    "tests/kernels/cpu/conv/test_conv.py",
    "tests/kernels/cpu/conv/test_pixel_rows.py",
    "tests/kernels/cpu/conv/test_direct_rows.py",
    "tests/kernels/cpu/conv/test_depthwise_lanes.py",
    "tests/kernels/cpu/conv/test_gemv.py::test_matches_the_reference",
    "tests/kernels/cpu/conv/test_gemv.py::test_every_activation_on_odd_channels",
    "tests/kernels/cpu/conv/test_gemv.py::test_panels_hold_each_channel_depth_major",
    "tests/kernels/cpu/test_binary.py::test_rows_around_the_vector_width_in_place_and_not",
    "tests/kernels/cpu/pool/test_pool.py::test_global_average_of_planes_around_the_vector_width",
    "tests/kernels/cpu/test_fastmath.py",
    *(
        f"tests/kernels/cpu/int8/test_int8_dot.py::{name}"
        for name in (
            "test_split_pairs_is_exact_and_fits_for_every_pair",
            "test_bytes_split_takes_the_int16_loop_for_many_fix_ups",
            "test_every_block_width_sums_exactly",
            "test_fix_ups_make_bytes_exact_at_the_extremes",
            "test_dot_conv_equals_reference_at_the_extremes",
            "test_layers_split_over_threads_equal_reference",
            "test_full_range_qdq_resnet_block_equals_the_reference",
        )
    ),
)

PROBE = (
    "from edgecnn.kernels.cpu.gemm import microkernel as m; from edgecnn.kernels.cpu.int8 import dot_kernel as d;"
    " print(m.ROWS, m.COLUMNS, d.VNNI, d.WIDE)"
)

pytestmark = pytest.mark.skipif(not WIDE, reason="numba compiles for AVX2 here: the suite runs its blocks")


def _avx2_env(cache: Path) -> dict[str, str]:
    return {
        **os.environ,
        "NUMBA_CPU_NAME": "haswell",
        "NUMBA_CPU_FEATURES": AVX2_FEATURES,
        "NUMBA_CACHE_DIR": str(cache),
    }


@pytest.mark.slow
def test_kernel_tests_pass_with_avx2_blocks(tmp_path: Path) -> None:
    env = _avx2_env(tmp_path)
    shape = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert shape.stdout.split() == ["6", "16", "False", "False"], shape.stderr
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *SHAPE_DEPENDENT],
        env=env, capture_output=True, text=True, timeout=1800, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
