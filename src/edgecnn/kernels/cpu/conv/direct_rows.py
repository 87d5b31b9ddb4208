"""Direct convolution with the output pixels as the micro-kernel's rows and the output channels as
its columns: no im2col matrix, and no lanes lost to a map's width.

Why: the direct kernel (conv/direct.py) puts COLUMNS consecutive pixels of an output row in the
micro-kernel's vector lanes, so rows that are not a multiple of COLUMNS wide leave lanes empty:
SqueezeNet's 55-wide maps fill 55 of 64, its 111-wide stem 111 of 128. Here the vector lanes hold
COLUMNS output channels and the broadcast rows ROWS consecutive pixels of an output row, so a row
wastes at most ROWS - 1 pixels' work; the last panel wastes what the output channels leave of its
COLUMNS. The rule (``when_direct_rows``) takes a layer where that wastes less than the direct
kernel does, and shallow layers, where it needs no im2col copy and no transforms.

The input is copied into conv_direct's zero-padded, stride-split frame, where each filter tap of
ROWS consecutive output pixels is one contiguous run at an offset that depends on the tap only
(``tap_offsets``). The micro-kernel reads A from the frame through those offsets, and stores its
ROWS x COLUMNS block transposed, each output channel's ROWS pixels as one vector of the NCHW
output, with bias and ReLU or clip applied (``micro_kernel_tap_a_transposed``); other activations
follow per task, on the rows it wrote, while they are in cache.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numba
import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.conv import steps as conv
from edgecnn.kernels.cpu.conv.direct import fill_frame, frame_shape, tap_offsets
from edgecnn.kernels.cpu.conv.pixel_rows import can_run, pack_panels
from edgecnn.kernels.cpu.conv.setup import ConvKernel, ConvSetup, conv_setup
from edgecnn.kernels.cpu.conv.tiled_gemm import rows_epilogue
from edgecnn.kernels.cpu.conv.winograd_transforms import PAGE_BYTES
from edgecnn.kernels.cpu.gemm.microkernel import COLUMNS, ROWS, micro_kernel_tap_a_transposed
from edgecnn.kernels.cpu.selection import register
from edgecnn.kernels.cpu.system.common import scratch
from edgecnn.kernels.cpu.system.threads import current_threads, small_conv, worker_share
from edgecnn.kernels.cpu.system.twins import parallel_and_serial
from edgecnn.kernels.cpu.tuning_record import active_cpu_tuning

BAND_PIXELS = 256
"""Output pixels per task, rounded up to whole output rows."""


def lane_shares(setup: ConvSetup) -> tuple[float, float]:
    """Shares of the micro-kernel's multiply-adds that compute output values: (direct kernel, this
    one). The direct kernel loses the runs of COLUMNS pixels that rows do not fill; this one the
    runs of ROWS pixels, and the part of the last COLUMNS-channel panel that no channel fills."""
    width, channels = setup.out[1], setup.out_channels
    direct = width / (math.ceil(width / COLUMNS) * COLUMNS)
    rows = width / (math.ceil(width / ROWS) * ROWS) * channels / (math.ceil(channels / COLUMNS) * COLUMNS)
    return direct, rows


def whole_pages(setup: ConvSetup) -> bool:
    """Whether each output plane is a whole number of pages (PAGE_BYTES)."""
    return (setup.out[0] * setup.out[1] * 4) % PAGE_BYTES == 0


def when_direct_rows(
    node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> bool:
    """Ungrouped, not 1x1, and only where the micro-kernel takes the BLAS tiles' layers
    (conv.micro_kernel_over_blas: AVX-512, where the block's transpose is 24 shuffles). Three cases
    (thresholds in CpuTuning): the layers the direct kernel's rule takes
    (conv.when_direct) where this kernel leaves fewer lanes empty (``min_gain`` times the direct
    kernel's share; ties stay with it); shallow layers (fewer than ``shallow_channels`` input
    channels, at least ``min_tap_depth`` multiply-adds per output), where the other kernels' GEMMs
    are too shallow or their copies cost more than the multiplications; and layers of at most
    ``paged_channels`` channels on planes of whole pages, where Winograd's stores a plane apart fall
    into one L1 set. It is tried before the Winograd and pixel-row kernels (selection.py) for the
    second and third cases; the first never meets their rules."""
    if not (conv.micro_kernel_over_blas() and can_run(node, types, values)):
        return False
    setup = conv_setup(node, types)
    assert setup is not None
    if setup.kernel == (1, 1):
        return False
    depth = setup.in_channels * setup.kernel[0] * setup.kernel[1]
    tuning = active_cpu_tuning()
    if setup.in_channels < tuning.shallow_channels and depth >= tuning.min_tap_depth:
        return True
    paged = setup.in_channels <= tuning.paged_channels and whole_pages(setup)
    if paged and depth >= tuning.min_tap_depth:
        return True
    direct, rows = lane_shares(setup)
    return conv.when_direct(node, types, values) and rows > tuning.min_gain * direct


@numba.njit(inline="always", cache=True)
def _share_start(
    worker: int, workers: int, tasks: int, panels: int, bands: int, band: int, stride_h: int, batch: int
) -> tuple[int, int]:
    """(image, frame row) where worker ``worker``'s share of the (image, band, panel) tasks starts
    reading; (batch, 0) for the end of the last share."""
    if worker >= workers:
        return batch, 0
    first_task = worker_share(worker, workers, tasks)[0]
    rest = first_task // panels
    return rest // bands, rest % bands * band * stride_h


def _direct_rows_conv_2d(
    x: np.ndarray,  # (N, C, H, W)
    pad_top: int,
    pad_left: int,
    frame: np.ndarray,  # (N*C*frame rows, phases, columns) scratch, filled here
    packed: np.ndarray,  # pack_panels(filters, taps_first=False)
    offsets: np.ndarray,  # (K,) tap_offsets
    bias: np.ndarray,  # (M,)
    stride_h: int,
    kind: int,
    alpha: float,
    low: float,
    high: float,
    band: int,  # output rows per task
    workers: int,
    out: np.ndarray,  # (N, M, OH, OW), written
) -> None:
    """The frame filled by all workers, then every (image, band, panel) task (two parallel regions).

    Each worker fills the frame rows from where its own tasks start reading, in every channel, up to
    where the next worker's start: the rows it reads back are then, but for the window's few rows
    past the boundary, lines its own core wrote, not lines to fetch from the other core's cache."""
    batch, out_channels, out_h, out_w = out.shape
    depth = offsets.shape[0]
    panels = packed.shape[0] // (depth * COLUMNS)
    all_rows = frame.shape[0]
    plane_rows = all_rows // (batch * x.shape[1])
    image_rows = all_rows // batch
    bands = (out_h + band - 1) // band
    tasks = batch * bands * panels
    for worker in numba.prange(workers):
        n0, y0 = _share_start(worker, workers, tasks, panels, bands, band, stride_h, batch)
        n1, y1 = _share_start(worker + 1, workers, tasks, panels, bands, band, stride_h, batch)
        for n in range(n0, min(n1 + 1, batch)):
            first_y = y0 if n == n0 else 0
            end_y = y1 if n == n1 else plane_rows
            if end_y > first_y:
                fill_frame(x, pad_top, pad_left, n * image_rows, (n + 1) * image_rows, first_y, end_y, frame)
    phases, columns = frame.shape[1], frame.shape[2]
    image_size = image_rows * phases * columns
    row_size = stride_h * phases * columns
    pixels = out_h * out_w
    frame_flat = frame.reshape(-1)
    result = out.reshape(-1)
    fused = kind == 0 or kind == 1 or kind == 3  # the micro-kernel's stores apply these
    store_kind = kind if fused else 0
    out_rows = out.reshape(batch, out_channels, pixels)
    for worker in numba.prange(workers):
        first_task, end_task = worker_share(worker, workers, tasks)
        for task in range(first_task, end_task):
            panel = task % panels
            rest = task // panels
            oy0 = rest % bands * band
            n = rest // bands
            oy1 = min(oy0 + band, out_h)
            first = panel * COLUMNS
            for oy in range(oy0, oy1):
                row_at = n * image_size + oy * row_size
                target = (n * out_channels + first) * pixels + oy * out_w
                for ox0 in range(0, out_w, ROWS):
                    micro_kernel_tap_a_transposed(
                        depth, frame_flat, row_at + ox0, offsets, packed, first * depth, COLUMNS, result,
                        target + ox0, pixels, False, min(ROWS, out_w - ox0), out_channels - first, bias, first,
                        store_kind, np.float32(low), np.float32(high),
                    )  # fmt: skip
            if not fused:
                last = min(first + COLUMNS, out_channels)
                rows_epilogue(
                    out_rows[n], first, last, oy0 * out_w, oy1 * out_w, bias, False, kind, alpha, low, high
                )


direct_rows_conv_2d, direct_rows_conv_2d_serial = parallel_and_serial(
    _direct_rows_conv_2d, "direct_rows_conv_2d"
)


class DirectRowsConv(ConvKernel):
    """One layer's weights packed in channel panels, its tap offsets and frame geometry."""

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        super().__init__(node, types, values)
        s = self.setup
        w = values[1]
        assert w is not None and s.group == 1
        self.packed = pack_panels(np.asarray(w, dtype=np.float32), taps_first=False)
        self.offsets = tap_offsets(s, ROWS)
        rows, phases, columns = frame_shape(s, ROWS)
        self.frame = (s.batch * s.in_channels * rows, phases, columns)
        self.band = max(1, min(s.out[0], math.ceil(BAND_PIXELS / s.out[1])))
        self.tasks = s.batch * math.ceil(s.out[0] / self.band) * math.ceil(s.out_channels / COLUMNS)
        self.small = small_conv(s.batch * s.out_channels * self.pixels * len(self.offsets))

    def run_into(self, out: np.ndarray, x: np.ndarray, *_: object) -> None:
        """Writes into ``out`` (C-contiguous, the output's shape; must not overlap ``x``)."""
        s = self.setup
        workers = 1 if self.small else max(1, min(current_threads(), self.tasks))
        frame = scratch(math.prod(self.frame)).reshape(self.frame)
        kernel = direct_rows_conv_2d_serial if workers == 1 else direct_rows_conv_2d
        kernel(
            np.ascontiguousarray(x), s.pads[0], s.pads[1], frame, self.packed, self.offsets, self.bias,
            s.strides[0], *self.activation, self.band, workers, out,
        )  # fmt: skip


register("direct_rows", DirectRowsConv, when=when_direct_rows, applies=can_run)
