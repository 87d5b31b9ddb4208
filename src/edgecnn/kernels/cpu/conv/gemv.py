"""Convolution whose window covers its whole input (a 1x1 layer on a 1x1 map, the squeeze and
excite layers of squeeze-and-excitation blocks) as a matrix-vector product per image:
y[n, m] = act(sum_k W[m, k] x[n, k] + b[m]), K = C * kh * kw and x[n] the image's values in order.

Why: the GEMM kernels (conv/pointwise.py, conv/pixel_rows.py) put the map's pixels in the
micro-kernel's blocks; with one pixel, 1 of its COLUMNS (or ROWS) lanes does work and the rest is
packing and block edges, a fixed cost far above the few thousand multiply-adds of the layer.

The weights are packed once, at plan time, as PANEL-channel panels with depth-major rows,
(panels, K, PANEL), the last panel's rows only as wide as its channels. A panel's step reads one
contiguous row of weights per input value, four input values per step (four independent products
summed before they meet the running sums), and the running sums of one panel stay in L1. The
loops always run PANEL lanes (a constant trip count: four vectors of the width numba compiles for,
no remainder loop); on a narrow last panel the lanes past its width read the next rows (PANEL
zeros end the array) and are never stored. The weights' bytes are what a layer costs when they
come from memory, and a squeeze layer has few channels (EfficientNet-B0's 672 -> 28: rows padded
to PANEL would more than double them).

Nothing is packed per call: the input is read in place. Tasks are (panel, group of images)
pairs, a contiguous run of them per thread; where a panel outgrows L1, groups of GROUP images
read each weight row once for all of them, and the images of a batch's last, partial group (or a
batch of one) go one at a time. The layer stays on one thread below the GEMM grain
(``small_conv``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.conv import steps as conv
from edgecnn.kernels.cpu.conv.depthwise_bands import l1_data_bytes
from edgecnn.kernels.cpu.conv.setup import ConvKernel, ConvSetup, conv_setup
from edgecnn.kernels.cpu.gemm.epilogue import activate_in_place
from edgecnn.kernels.cpu.gemm.microkernel import LANES
from edgecnn.kernels.cpu.selection import register
from edgecnn.kernels.cpu.system.threads import current_threads, small_conv, worker_share
from edgecnn.kernels.cpu.system.twins import parallel_and_serial

PANEL = 4 * LANES
"""Output channels per panel: four vectors of the width numba compiles for."""

GROUP = 4
"""Images per task where a panel's weights outgrow L1: a full group of a batch reads each weight
row once for all of them (from L2 or further), not once per image. A panel that fits L1 is read
again from there at little cost, less than the group's four rows of running sums."""


def whole_window(setup: ConvSetup) -> bool:
    """One group, no padding, and a window exactly the input's size (a setup exists only where the
    dilations let it fit): the output is 1x1 and its window reads every input value once, in
    memory order."""
    return setup.group == 1 and not any(setup.pads) and setup.kernel == (setup.height, setup.width)


def when_gemv(node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]) -> bool:
    """A compiled convolution (constant float32 weights) whose window covers the whole input."""
    if not conv.can_pack(node, types, values):
        return False
    setup = conv_setup(node, types)
    return setup is not None and whole_window(setup)


def pack_gemv_weights(matrix: np.ndarray) -> np.ndarray:
    """(M, K) -> flat (panels, K, width) and PANEL zeros: channel PANEL * p + j in column j of panel
    p's rows, each PANEL wide but the last, as wide as its channels."""
    out_channels, depth = matrix.shape
    packed = np.zeros(out_channels * depth + PANEL, dtype=np.float32)
    for first in range(0, out_channels, PANEL):
        width = min(PANEL, out_channels - first)
        start = first * depth
        packed[start : start + depth * width] = matrix[first : first + width].T.reshape(-1)
    return packed


@numba.njit(inline="always", cache=True)
def _one_image(
    x_flat: np.ndarray, packed: np.ndarray, sums: np.ndarray, row: int, w: int, width: int, depth: int
) -> None:
    """sums[:PANEL] = the panel at ``w`` (``width`` channels) times the image at x_flat[row:]: four
    input values per step, their products summed before they meet the running sums."""
    lanes = np.uint64(PANEL)
    whole = depth - depth % 4
    # unsigned offsets in the vector loops: a signed index gets a wraparound test that keeps
    # them scalar
    p1 = np.uint64(width)
    p2, p3 = p1 + p1, p1 + p1 + p1
    for j in range(lanes):
        sums[j] = 0.0
    for k in range(0, whole, 4):
        x0, x1, x2, x3 = x_flat[row + k], x_flat[row + k + 1], x_flat[row + k + 2], x_flat[row + k + 3]
        at = np.uint64(w + k * width)
        for j in range(lanes):
            pair = x0 * packed[at + j] + x1 * packed[at + p1 + j]
            sums[j] += pair + (x2 * packed[at + p2 + j] + x3 * packed[at + p3 + j])
    for k in range(whole, depth):
        xk = x_flat[row + k]
        at = np.uint64(w + k * width)
        for j in range(lanes):
            sums[j] += xk * packed[at + j]


@numba.njit(inline="always", cache=True)
def _four_images(
    x_flat: np.ndarray, packed: np.ndarray, sums: np.ndarray, row: int, w: int, width: int, depth: int
) -> None:
    """sums[i * PANEL : (i + 1) * PANEL] = the panel at ``w`` times image i of the four at
    x_flat[row:] (``depth`` values apart): each weight row read once for the four."""
    lanes = np.uint64(PANEL)
    s1 = np.uint64(PANEL)
    s2, s3 = s1 + s1, s1 + s1 + s1
    for j in range(np.uint64(GROUP * PANEL)):
        sums[j] = 0.0
    for k in range(depth):
        at = np.uint64(w + k * width)
        x0, x1 = x_flat[row + k], x_flat[row + depth + k]
        x2, x3 = x_flat[row + 2 * depth + k], x_flat[row + 3 * depth + k]
        for j in range(lanes):
            v = packed[at + j]
            sums[j] += x0 * v
            sums[s1 + j] += x1 * v
            sums[s2 + j] += x2 * v
            sums[s3 + j] += x3 * v


@numba.njit(inline="always", cache=True)
def _finish(
    y: np.ndarray,
    target: int,
    sums: np.ndarray,
    at: int,
    bias: np.ndarray,
    channel: int,
    width: int,
    kind: int,
    alpha: float,
    low: float,
    high: float,
) -> None:
    """y[target + j] = act(sums[at + j] + bias[channel + j]) for the panel's ``width`` channels."""
    for j in range(width):
        y[target + j] = sums[at + j] + bias[channel + j]
    activate_in_place(y, np.uint64(target), np.uint64(width), kind, alpha, low, high)


def _gemv_conv(
    x: np.ndarray,  # (N, C, kh, kw), C-contiguous
    packed: np.ndarray,  # pack_gemv_weights of the (M, K) filters
    bias: np.ndarray,  # (M,)
    kind: int,
    alpha: float,
    low: float,
    high: float,
    group: int,  # GROUP, or 1: images per task
    workers: int,
    out: np.ndarray,  # (N, M, 1, 1), written
) -> None:
    batch, out_channels = out.shape[0], out.shape[1]
    depth = x.size // batch
    x_flat = x.reshape(-1)
    y = out.reshape(-1)
    panels = (out_channels + PANEL - 1) // PANEL
    groups = (batch + group - 1) // group
    tasks = panels * groups
    for worker in numba.prange(workers):
        sums = np.empty(GROUP * PANEL, dtype=np.float32)
        first, end = worker_share(worker, workers, tasks)
        for task in range(first, end):
            panel, task_group = divmod(task, groups)
            channel = panel * PANEL
            width = min(PANEL, out_channels - channel)
            w = channel * depth
            start = task_group * group
            if group == GROUP and batch - start >= GROUP:
                _four_images(x_flat, packed, sums, start * depth, w, width, depth)
                for i in range(GROUP):
                    target = (start + i) * out_channels + channel
                    _finish(y, target, sums, i * PANEL, bias, channel, width, kind, alpha, low, high)
            else:
                for n in range(start, min(start + group, batch)):
                    _one_image(x_flat, packed, sums, n * depth, w, width, depth)
                    target = n * out_channels + channel
                    _finish(y, target, sums, 0, bias, channel, width, kind, alpha, low, high)


gemv_conv, gemv_conv_serial = parallel_and_serial(_gemv_conv, "gemv_conv")


class GemvConv(ConvKernel):
    """A whole-window layer's packed panels; runs them on one thread below the grain."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        super().__init__(node, types, values)
        s = self.setup
        w = values[1]
        assert w is not None and whole_window(s)
        depth = s.in_channels * s.kernel[0] * s.kernel[1]
        self.packed = pack_gemv_weights(np.asarray(w, dtype=np.float32).reshape(s.out_channels, depth))
        self.group = GROUP if depth * PANEL * 4 > l1_data_bytes() else 1
        self.tasks = -(-s.out_channels // PANEL) * -(-s.batch // self.group)
        self.small = small_conv(s.batch * s.out_channels * depth)

    def run_into(self, out: np.ndarray, x: np.ndarray, *_: object) -> None:
        """Writes into ``out`` (C-contiguous, the output's shape; must not overlap ``x``)."""
        workers = 1 if self.small else min(current_threads(), self.tasks)
        kernel = gemv_conv_serial if workers == 1 else gemv_conv
        kernel(np.ascontiguousarray(x), self.packed, self.bias, *self.activation, self.group, workers, out)


register("gemv", GemvConv, when=when_gemv)
