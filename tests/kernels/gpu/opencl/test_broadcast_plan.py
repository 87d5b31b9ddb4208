"""OpenCL's elementwise launch plan: broadcast_plan merges adjacent axes that broadcast alike, so a
binary op walks as few strided axes as possible."""

from __future__ import annotations

from edgecnn.kernels.opencl.eltwise import broadcast_plan


def test_broadcast_plan_merges_axes() -> None:
    assert broadcast_plan((2, 3, 4), (2, 3, 4)) == ([24], [1], [1])
    assert broadcast_plan((2, 3, 4, 5), (3, 1, 1)) == ([2, 3, 20], [60, 20, 1], [0, 1, 0])
    assert broadcast_plan((), ()) == ([1], [0], [0])
