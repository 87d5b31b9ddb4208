"""The dynamic-time-warping distance of seed 001's eq. 5.2, from dtaidistance's C kernel: the
square root of the summed squared differences along the cheapest warping path (seed 001 summed
plain differences, so its threshold of 480 does not carry over; ours is chosen from our traces).
A library rather than a compiled kernel of ours: fast enough per sample, and no compile at start-up.

``psi`` frees up to that many samples at the start and end of either sequence from the match
(dtaidistance's psi relaxation): a window of a periodic load cut at another phase than the
template's then costs nothing for the part before its first full cycle. Without it, a window that
starts in a trough where the template starts in a peak is as far as another scene."""

from __future__ import annotations

from typing import Any

import numpy as np

from edgecnn.dvfs.extra import require

_kernel: Any = None


def default_psi(template_samples: int) -> int:
    """A quarter of the template. Larger values forgive more of a phase shift but also let a load
    that is busy all the time skip the periodic troughs that tell a CNN app from it."""
    return template_samples // 4


def dtw_distance(a: np.ndarray, b: np.ndarray, psi: int = 0) -> float:
    """DTW distance between two load sequences (any lengths, no warping window)."""
    global _kernel
    if _kernel is None:
        require("dtaidistance")
        from dtaidistance import dtw

        _kernel = dtw.distance_fast
    first = np.ascontiguousarray(a, dtype=np.float64)
    second = np.ascontiguousarray(b, dtype=np.float64)
    return float(_kernel(first, second, psi=psi) if psi else _kernel(first, second))
