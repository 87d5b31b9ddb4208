"""The notice logged when edgecnn's kernels are compiled rather than loaded (compile_notice.py).

Each case runs in a fresh interpreter with a numba cache directory of its own: the first process
compiles (and must say so once), the second loads the cache (and must say nothing)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from edgecnn.kernels.cpu.system.compile_notice import MESSAGE

CHILD = textwrap.dedent(
    """
    import numpy as np
    from edgecnn.kernels.cpu import initialize_cpu_runtime
    from edgecnn.kernels.cpu.eltwise import activation
    initialize_cpu_runtime()  # installs the notice
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    out = np.empty_like(x)
    activation(x, 1, 0.0, 0.0, 0.0, 16, out)  # ReLU: compiled, or loaded from the cache
    assert np.array_equal(out, np.maximum(x, 0))
    """
)


def _stderr(cache: Path) -> str:
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stderr


def test_compiling_says_so_once_and_loading_says_nothing(tmp_path: Path) -> None:
    first = _stderr(tmp_path)
    assert first.count(MESSAGE) == 1, first
    assert MESSAGE not in _stderr(tmp_path)
