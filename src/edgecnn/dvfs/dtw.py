"""The dynamic-time-warping distance of seed 001's eq. 5.2, from dtaidistance's C kernel: the
square root of the summed squared differences along the cheapest warping path (seed 001 summed
plain differences, so its threshold of 480 does not carry over; ours is chosen from our traces).
Why a library and not a kernel of ours: lab/governor_dtw_cost.py times both on 40-sample series."""

from __future__ import annotations

from typing import Any

import numpy as np

from edgecnn.dvfs.extra import require

_kernel: Any = None


def dtw_distance(a: np.ndarray, b: np.ndarray) -> float:
    """DTW distance between two load sequences (any lengths, no warping window)."""
    global _kernel
    if _kernel is None:
        require("dtaidistance")
        from dtaidistance import dtw

        _kernel = dtw.distance_fast
    return float(
        _kernel(np.ascontiguousarray(a, dtype=np.float64), np.ascontiguousarray(b, dtype=np.float64))
    )
