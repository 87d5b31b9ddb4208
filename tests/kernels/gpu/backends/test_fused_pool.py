"""FusedMaxPool/FusedAveragePool on every GPU-ish backend (the pool kernel, then the activation
kernel in place) against their reference: pool, then the activation."""

from __future__ import annotations

import numpy as np
import pytest

from edgecnn.ops.fused_pool import FusedAveragePoolAttrs, FusedMaxPoolAttrs
from kernels.gpu.backends.support import Backend, rand

CASES = [
    ("FusedMaxPool", FusedMaxPoolAttrs(kernel_shape=(3, 3), strides=(2, 2), ceil_mode=True, activation="relu")),
    ("FusedMaxPool", FusedMaxPoolAttrs(kernel_shape=(2, 2), pads=(0, 0, 1, 1), activation="leaky_relu", negative_slope=0.1)),
    ("FusedMaxPool", FusedMaxPoolAttrs(kernel_shape=(3, 3), pads=(1, 1, 1, 1), activation="none")),
    ("FusedAveragePool", FusedAveragePoolAttrs(kernel_shape=(3, 3), pads=(1, 1, 1, 1), activation="clip", low=0.0, high=0.25)),
    ("FusedAveragePool", FusedAveragePoolAttrs(kernel_shape=(2, 3), strides=(2, 1), count_include_pad=True, pads=(1, 0, 1, 2), activation="sigmoid")),
    ("FusedAveragePool", FusedAveragePoolAttrs(kernel_shape=(3,), strides=(2,), activation="silu")),
]  # fmt: skip


@pytest.mark.parametrize(("op", "attrs"), CASES, ids=[f"{op}-{a.activation}" for op, a in CASES])
def test_fused_pool_matches_reference(device: Backend, op: str, attrs: object) -> None:
    rank = len(attrs.kernel_shape)  # type: ignore[attr-defined]
    x = 2 * rand(np.random.default_rng(rank), 2, 3, *((9, 10) if rank == 2 else (11,)))
    kernel = "fused_max_pool" if op == "FusedMaxPool" else "fused_average_pool"
    for forms in device.kernel_forms():
        with forms():
            device.check_node(op, attrs, [x], kernel=kernel)
