"""Direct depthwise 2-D convolution (each input channel convolved by its own filters): GEMM would
waste its work on 1-row matrices, so loop directly, parallel over contiguous runs of planes.

Output channel m reads input channel m // multiplier (multiplier = C_out / C_in, 1 for MobileNet).
Each worker copies its input plane into a zero-bordered buffer of its own (allocated and zeroed
once per call: the border is the same for every plane), so the loops carry no bounds tests. A 3x3
filter (the MobileNet/ShuffleNet case) is one pass that sums its nine taps in registers and writes
each output once; other filters at stride 1, or 2 without dilation (5x5, 7x7), run in bands of
rows, one pass per filter row (depthwise_bands.py); the rest (stride 3, dilated stride 2)
accumulate tap by tap over whole rows. The activation (gemm/epilogue.py's activate_in_place)
runs over the finished pass while it is still in cache.

Over 400 lines on purpose: the compiled passes (one parallel kernel per path, picked in Python by
``depthwise_conv_2d`` so that a model compiles only the paths its layers take) and the plane layouts
(padded, phased) and row passes they inline, which share their buffers' conventions.

numba keys its on-disk cache of each pass on this file's contents only: the helpers they inline
from depthwise_bands.py, gemm/epilogue.py and fastmath.py are not part of the key, so a change
there is compiled in only once this file changes too (or numba's cache files are removed).
"""

from __future__ import annotations

from collections.abc import Callable

import numba
import numpy as np

from edgecnn.kernels.cpu.conv.depthwise_bands import banded_plane, finish_rows
from edgecnn.kernels.cpu.gemm.epilogue import F32, activate_in_place

FLAT_S2_MAX_WIDTH = 14
"""Widest stride-2 output row computed as one long row (wider rows waste more than they save)."""

SAME_MAX_WIDTH = 16
"""Widest plane the unpadded stride-1 pass takes (same_plane_3x3): it beats the padded pass on
small planes, while on wider ones the masked taps cost more than the per-row work they save."""


@numba.njit(cache=True)
def fill_padded(src: np.ndarray, pad_top: int, pad_left: int, stride: int, padded: np.ndarray) -> None:
    """Copy the plane into ``padded`` at (pad_top, pad_left), each row's columns dealt into
    ``stride`` phases (padded column c goes to c % stride * phase_w + c // stride), so that the
    taps of a strided window row are contiguous. Cells outside the plane keep their zeros (written
    once when the buffer was made); columns past the buffer's reach are never read."""
    height, width = src.shape
    rows = padded.shape[0]
    phase_w = padded.shape[1] // stride
    reach = phase_w * stride  # padded columns the buffer holds
    x0 = max(0, -pad_left)  # first input column that lands inside the buffer
    x1 = min(width, reach - pad_left)
    if x1 <= x0:
        return
    for py in range(max(0, pad_top), min(rows, pad_top + height)):
        row = src[py - pad_top]
        dest = padded[py]
        if stride == 1:
            line = row[x0:]  # views from index 0: a plain vectorised copy
            target = dest[x0 + pad_left :]
            for i in range(x1 - x0):
                target[i] = line[i]
        elif stride == 2:
            _deal_pairs(row, x0, x1, pad_left, phase_w, dest)
        else:
            for phase in range(stride):
                c = x0 + pad_left  # first padded column of this phase at or after the plane's start
                c += (phase - c % stride) % stride
                if c - pad_left >= x1:
                    continue
                count = (x1 - (c - pad_left) + stride - 1) // stride
                line = row[c - pad_left :: stride]
                target = dest[phase * phase_w + c // stride :]
                for i in range(count):
                    target[i] = line[i]


@numba.njit(cache=True)
def _deal_pairs(row: np.ndarray, x0: int, x1: int, pad_left: int, phase_w: int, dest: np.ndarray) -> None:
    """Stride 2: input columns x0..x1 to padded columns x + pad_left, even ones to the first half of
    ``dest``, odd ones to the second. Pairs are read in one loop (LLVM vectorises the interleaved
    loads), after a leading odd column and before a trailing even one."""
    c = x0 + pad_left
    x = x0
    if c % 2 == 1:
        dest[phase_w + c // 2] = row[x]
        c += 1
        x += 1
    pairs = (x1 - x) // 2
    source = row[x:]
    evens = dest[c // 2 :]
    odds = dest[phase_w + c // 2 :]
    for i in range(pairs):
        evens[i] = source[2 * i]
        odds[i] = source[2 * i + 1]
    if (x1 - x) % 2 == 1:
        dest[(c + 2 * pairs) // 2] = row[x1 - 1]


@numba.njit(cache=True)
def fill_phases(src: np.ndarray, pad_top: int, pad_left: int, phases: np.ndarray) -> None:
    """Deal the zero-padded plane into its four stride-2 phases: phases[2 * (Y % 2) + X % 2, Y // 2,
    X // 2] = padded[Y, X], for the rows and columns the buffer holds. Cells outside the plane keep
    their zeros (written once when the buffer was made, the same cells every plane). Each row's
    columns are read in pairs (an even and an odd padded column) in one loop, which LLVM vectorises
    with two-register permutes; dealing each parity in a loop of its own left the strided loads
    scalar. Flat unsigned offsets, no views: per-row views cost as much as the dealing itself."""
    height, width = src.shape
    rows, columns = phases.shape[1], phases.shape[2]
    source = src.reshape(-1)
    target = phases.reshape(-1)
    plane = rows * columns
    lead = pad_left % 2  # 1: input column 0 lands on an odd padded column and is dealt alone
    first = (lead + pad_left) // 2  # phase column of the first pair
    pairs = max(0, min((width - lead) // 2, columns - first))
    tail = width - lead - 2 * pairs == 1 and first + pairs < columns  # an even column after the pairs
    one = np.uint64(1)
    for iy in range(height):
        y = iy + pad_top
        if y >= 2 * rows:
            break
        row = np.uint64(iy * width)
        even = np.uint64((y % 2) * 2 * plane + (y // 2) * columns + first)
        odd = even + np.uint64(plane)
        if lead == 1 and first <= columns:
            target[odd - one] = source[row]
        at = row + np.uint64(lead)
        for k in range(np.uint64(pairs)):
            target[even + k] = source[at + k + k]
            target[odd + k] = source[at + k + k + one]
        if tail:
            target[even + np.uint64(pairs)] = source[at + np.uint64(2 * pairs)]


@numba.njit(cache=True)
def tap_column(offset: int, stride: int, phase_w: int) -> int:
    """Where padded column ``offset`` (a tap's, for output column 0) sits in a phased row."""
    return offset % stride * phase_w + offset // stride


@numba.njit(cache=True)
def _rows_3x3(
    padded: np.ndarray,
    w: np.ndarray,
    bias: F32,
    stride_h: int,
    stride_w: int,
    dil_h: int,
    dil_w: int,
    dest: np.ndarray,
) -> None:
    """dest[oy, ox] = bias + sum of the 3x3 taps at (oy*stride_h, ox*stride_w) in the padded plane."""
    out_h = dest.shape[0]
    b = np.float32(bias)
    phase_w = padded.shape[1] // stride_w
    t0 = tap_column(0, stride_w, phase_w)
    t1 = tap_column(dil_w, stride_w, phase_w)
    t2 = tap_column(2 * dil_w, stride_w, phase_w)
    for oy in range(out_h):
        top = oy * stride_h
        r0 = padded[top]
        r1 = padded[top + dil_h]
        r2 = padded[top + 2 * dil_h]
        _taps3(
            r0[t0:], r0[t1:], r0[t2:], r1[t0:], r1[t1:], r1[t2:], r2[t0:], r2[t1:], r2[t2:], w, b, dest[oy]
        )


@numba.njit(inline="always", cache=True)
def _taps3(
    a0: np.ndarray,
    a1: np.ndarray,
    a2: np.ndarray,
    b0: np.ndarray,
    b1: np.ndarray,
    b2: np.ndarray,
    c0: np.ndarray,
    c1: np.ndarray,
    c2: np.ndarray,
    w: np.ndarray,
    b: np.float32,
    out: np.ndarray,
) -> None:
    """out[i] = b + the nine taps' products at i: contiguous views starting at each tap's column,
    and indices from a range() known non-negative, so numba drops its wraparound tests and the loop
    vectorises."""
    w00, w01, w02 = w[0, 0], w[0, 1], w[0, 2]
    w10, w11, w12 = w[1, 0], w[1, 1], w[1, 2]
    w20, w21, w22 = w[2, 0], w[2, 1], w[2, 2]
    for i in range(out.shape[0]):
        out[i] = (
            b
            + (w00 * a0[i] + w01 * a1[i] + w02 * a2[i])
            + (w10 * b0[i] + w11 * b1[i] + w12 * b2[i])
            + (w20 * c0[i] + w21 * c1[i] + w22 * c2[i])
        )


@numba.njit(inline="always", cache=True)
def _taps3_s2(
    a0: np.ndarray,
    a1: np.ndarray,
    a2: np.ndarray,
    b0: np.ndarray,
    b1: np.ndarray,
    b2: np.ndarray,
    c0: np.ndarray,
    c1: np.ndarray,
    c2: np.ndarray,
    w: np.ndarray,
    b: np.float32,
    out: np.ndarray,
) -> None:
    """_taps3 at stride 2: out[i] reads element 2i of every tap's view."""
    w00, w01, w02 = w[0, 0], w[0, 1], w[0, 2]
    w10, w11, w12 = w[1, 0], w[1, 1], w[1, 2]
    w20, w21, w22 = w[2, 0], w[2, 1], w[2, 2]
    for i in range(out.shape[0]):
        j = 2 * i
        out[i] = (
            b
            + (w00 * a0[j] + w01 * a1[j] + w02 * a2[j])
            + (w10 * b0[j] + w11 * b1[j] + w12 * b2[j])
            + (w20 * c0[j] + w21 * c1[j] + w22 * c2[j])
        )


@numba.njit(inline="always", cache=True)
def _axpy(a: np.float32, values: np.ndarray, out: np.ndarray) -> None:
    for i in range(out.shape[0]):
        out[i] += a * values[i]


@numba.njit(cache=True)
def _rows_any(
    padded: np.ndarray,
    w: np.ndarray,
    bias: F32,
    stride_h: int,
    stride_w: int,
    dil_h: int,
    dil_w: int,
    dest: np.ndarray,
) -> None:
    """Any filter size: each output row accumulates tap by tap (a vectorised multiply-add per tap)."""
    out_h, out_w = dest.shape
    kernel_h, kernel_w = w.shape
    b = np.float32(bias)
    phase_w = padded.shape[1] // stride_w
    for oy in range(out_h):
        out = dest[oy]
        for ox in range(out_w):
            out[ox] = b
        for ki in range(kernel_h):
            row = padded[oy * stride_h + ki * dil_h]
            for kj in range(kernel_w):
                _axpy(w[ki, kj], row[tap_column(kj * dil_w, stride_w, phase_w) :], out)


@numba.njit(cache=True)
def column_masks(height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Per flat position of an H x W plane: whether a left (ox > 0) and a right (ox < W - 1)
    neighbour exists in its row."""
    left = np.ones(height * width, dtype=np.bool_)
    right = np.ones(height * width, dtype=np.bool_)
    for oy in range(height):
        left[oy * width] = False
        right[oy * width + width - 1] = False
    return left, right


@numba.njit(inline="always", cache=True)
def same_plane_3x3(
    x: np.ndarray,  # flat input
    x_at: np.uint64,  # offset of the H x W input plane
    width: np.uint64,
    size: np.uint64,  # H * W
    left: np.ndarray,
    right: np.ndarray,
    w: np.ndarray,  # flat (M * 9) filters
    w_at: np.uint64,  # offset of this plane's nine taps
    b: np.float32,
    buf: np.ndarray,  # H * W + 2 * (W + 1) floats; its first and last W + 1 are zeros
    out: np.ndarray,  # flat output
    out_at: np.uint64,  # offset of the H x W output plane, written
) -> None:
    """out[q] = b + the nine taps at q for a 3x3, stride 1, pad 1 window: the plane copied once into
    ``buf`` between one zero row (and one cell) on each side, so the taps above the first row and
    below the last read zeros, and the taps left of column 0 and right of column W - 1 (which would
    read the neighbouring row's end) are masked. One flat pass per plane, no per-row work, and no
    array views: unsigned offsets into flat arrays (a view costs about as much as a 7x7 plane's
    arithmetic)."""
    one, two = np.uint64(1), np.uint64(2)
    start = width + one
    for i in range(size):
        buf[start + i] = x[x_at + i]
    below = width + width
    w00, w01, w02 = w[w_at], w[w_at + one], w[w_at + two]
    w10, w11, w12 = w[w_at + np.uint64(3)], w[w_at + np.uint64(4)], w[w_at + np.uint64(5)]
    w20, w21, w22 = w[w_at + np.uint64(6)], w[w_at + np.uint64(7)], w[w_at + np.uint64(8)]
    zero = np.float32(0.0)
    for i in range(size):  # buf[i], buf[width + i], buf[below + i]: the rows above, at, below q - 1
        west = w00 * buf[i] + w10 * buf[width + i] + w20 * buf[below + i]
        east = w02 * buf[i + two] + w12 * buf[width + i + two] + w22 * buf[below + i + two]
        centre = w01 * buf[i + one] + w11 * buf[width + i + one] + w21 * buf[below + i + one]
        out[out_at + i] = b + centre + (west if left[i] else zero) + (east if right[i] else zero)


@numba.njit(inline="always", cache=True)
def phased_plane_3x3(
    phases: np.ndarray,  # flat (4, OH + 1, pitch): fill_phases' four stride-2 phases
    plane: int,  # (OH + 1) * pitch
    pitch: int,  # OW + 1
    w: np.ndarray,  # flat (M * 9) filters
    w_at: np.uint64,
    b: np.float32,
    work: np.ndarray,  # >= count floats, written
    count: int,  # OH * pitch - 1
) -> None:
    """work[q] = b + the nine taps of output q = oy * pitch + ox (ox == OW computed and dropped), every
    tap a contiguous run of one phase, on unsigned offsets (no views: see same_plane_3x3)."""
    one = np.uint64(1)
    p = np.uint64(pitch)
    q01, q10 = np.uint64(plane), np.uint64(2 * plane)
    q11 = q10 + q01
    w00, w01, w02 = w[w_at], w[w_at + one], w[w_at + np.uint64(2)]
    w10, w11, w12 = w[w_at + np.uint64(3)], w[w_at + np.uint64(4)], w[w_at + np.uint64(5)]
    w20, w21, w22 = w[w_at + np.uint64(6)], w[w_at + np.uint64(7)], w[w_at + np.uint64(8)]
    for i in range(np.uint64(count)):
        work[i] = (
            b
            + (w00 * phases[i] + w01 * phases[q01 + i] + w02 * phases[i + one])
            + (w10 * phases[q10 + i] + w11 * phases[q11 + i] + w12 * phases[q10 + i + one])
            + (w20 * phases[p + i] + w21 * phases[q01 + p + i] + w22 * phases[p + i + one])
        )


def depthwise_pass(
    kernel: tuple[int, int],
    strides: tuple[int, int],
    pads: tuple[int, int, int, int],  # top, left, bottom, right
    dilations: tuple[int, int],
    out_w: int,
) -> Callable[..., None]:
    """The compiled pass for a layer's geometry, chosen here, in Python, so that a model compiles
    only the passes its layers take (each a parallel kernel of its own). Every pass takes the
    arguments of ``depthwise_conv_2d``, its inputs as ``pass_input`` and ``read_only`` make them."""
    three = kernel == (3, 3)
    stride_1, stride_2 = strides == (1, 1), strides == (2, 2)
    undilated = dilations == (1, 1)
    if not three:
        return _banded if stride_1 or (stride_2 and undilated) else _rows
    if stride_1 and undilated and pads == (1, 1, 1, 1) and out_w <= SAME_MAX_WIDTH:
        return _same_3x3
    if stride_2 and undilated:
        return _phased_3x3
    if stride_1 or (stride_2 and out_w <= FLAT_S2_MAX_WIDTH):
        return _flat_3x3
    return _rows


def pass_input(x: np.ndarray) -> np.ndarray:
    """``x`` C-contiguous and writable (copied in the rare case it is read-only), as a model's own
    buffers are: numba compiles a pass again for each new argument type, read-only arrays included."""
    x = np.ascontiguousarray(x)
    return x if x.flags.writeable else x.copy()


def read_only(a: np.ndarray) -> np.ndarray:
    """``a``, or a read-only view of it where it is writable: the passes take their weights and
    bias read-only, as a model holds its constants, so that every caller shares one compiled
    version of each."""
    if not a.flags.writeable:
        return a
    view = a.view()
    view.flags.writeable = False
    return view


def depthwise_conv_2d(
    x: np.ndarray,  # (N, C, H, W)
    weights: np.ndarray,  # (M, KH, KW), M = C * multiplier
    bias: np.ndarray,  # (M,)
    has_bias: bool,
    stride_h: int,
    stride_w: int,
    pad_top: int,
    pad_left: int,
    dilation_h: int,
    dilation_w: int,
    kind: int,
    alpha: float,
    low: float,
    high: float,
    band_floats: int,  # output positions per band of the banded pass (depthwise_bands.BAND_FLOATS)
    workers: int,  # parallel jobs: the caller's numba thread count (reading it in a pass defeats caching)
    out: np.ndarray,  # (N, M, OH, OW), written
) -> None:
    """out = act(depthwise conv(x) + bias) through ``depthwise_pass``'s choice (a step chooses once,
    when it is made). Bottom/right padding follows from the output shape (the padded extent the
    windows reach)."""
    kernel_h, kernel_w = weights.shape[1], weights.shape[2]
    out_h, out_w = out.shape[2], out.shape[3]
    bottom = (out_h - 1) * stride_h + (kernel_h - 1) * dilation_h + 1 - x.shape[2] - pad_top
    right = (out_w - 1) * stride_w + (kernel_w - 1) * dilation_w + 1 - x.shape[3] - pad_left
    geometry = ((kernel_h, kernel_w), (stride_h, stride_w), (pad_top, pad_left, bottom, right))
    kernel = depthwise_pass(*geometry, (dilation_h, dilation_w), out_w)
    kernel(
        pass_input(x), read_only(weights), read_only(bias), has_bias, stride_h, stride_w, pad_top, pad_left,
        dilation_h, dilation_w, kind, alpha, low, high, band_floats, workers, out,
    )  # fmt: skip


# The compiled passes below share their options (the numpy error model drops the division-by-zero
# test, and the exception path that kept the epilogue's loops scalar; "contract" lets LLVM fuse
# each multiply-add into an FMA) and their arguments, depthwise_conv_2d's (each ignores those it
# does not need), so that a step calls whichever depthwise_pass chose alike.


@numba.njit(parallel=True, nogil=True, cache=True, error_model="numpy", fastmath={"contract"})
def _same_3x3(
    x: np.ndarray,
    weights: np.ndarray,
    bias: np.ndarray,
    has_bias: bool,
    stride_h: int,
    stride_w: int,
    pad_top: int,
    pad_left: int,
    dilation_h: int,
    dilation_w: int,
    kind: int,
    alpha: float,
    low: float,
    high: float,
    band_floats: int,
    workers: int,
    out: np.ndarray,
) -> None:
    """Stride 1, 3x3, one pixel of padding all round and no dilation on planes up to SAME_MAX_WIDTH
    wide (MobileNetV2's and ShuffleNetV2's 14x14 and 7x7 layers): no padded rows and no views, see
    same_plane_3x3; the activation runs over the whole plane at once."""
    channels, out_channels = x.shape[1], weights.shape[0]
    multiplier = out_channels // channels
    out_h, out_w = out.shape[2], out.shape[3]
    planes = x.shape[0] * out_channels
    workers = max(1, min(workers, planes))
    x_flat, out_flat, w_flat = x.reshape(-1), out.reshape(-1), weights.reshape(-1)
    size = np.uint64(out_h * out_w)
    for worker in numba.prange(workers):
        left, right = column_masks(out_h, out_w)
        buf = np.zeros(out_h * out_w + 2 * (out_w + 1), dtype=np.float32)
        for job in range(worker * planes // workers, (worker + 1) * planes // workers):
            n, m = job // out_channels, job % out_channels
            b = bias[m] if has_bias else np.float32(0.0)
            x_at = np.uint64((n * channels + m // multiplier) * out_h * out_w)
            out_at = np.uint64(job) * size
            same_plane_3x3(
                x_flat, x_at, np.uint64(out_w), size, left, right, w_flat, np.uint64(m * 9), b, buf,
                out_flat, out_at,
            )  # fmt: skip
            activate_in_place(out_flat, out_at, size, kind, alpha, low, high)


@numba.njit(parallel=True, nogil=True, cache=True, error_model="numpy", fastmath={"contract"})
def _phased_3x3(
    x: np.ndarray,
    weights: np.ndarray,
    bias: np.ndarray,
    has_bias: bool,
    stride_h: int,
    stride_w: int,
    pad_top: int,
    pad_left: int,
    dilation_h: int,
    dilation_w: int,
    kind: int,
    alpha: float,
    low: float,
    high: float,
    band_floats: int,
    workers: int,
    out: np.ndarray,
) -> None:
    """3x3 at stride 2 without dilation: the padded plane dealt into its four stride-2 phases
    (fill_phases), each (OH + 1) x (OW + 1); output (oy, ox) then reads every tap at a fixed phase
    offset from oy * pitch + ox, all nine taps in one flat pass of contiguous loads
    (phased_plane_3x3)."""
    channels, out_channels = x.shape[1], weights.shape[0]
    multiplier = out_channels // channels
    out_h, out_w = out.shape[2], out.shape[3]
    planes = x.shape[0] * out_channels
    workers = max(1, min(workers, planes))
    pitch = out_w + 1
    plane = (out_h + 1) * pitch
    count = out_h * pitch - 1
    out_flat, w_flat = out.reshape(-1), weights.reshape(-1)
    for worker in numba.prange(workers):
        work = np.empty(out_h * pitch, dtype=np.float32)
        phases = np.zeros((4, out_h + 1, pitch), dtype=np.float32)
        flat = phases.reshape(-1)
        for job in range(worker * planes // workers, (worker + 1) * planes // workers):
            n, m = job // out_channels, job % out_channels
            b = bias[m] if has_bias else np.float32(0.0)
            fill_phases(x[n, m // multiplier], pad_top, pad_left, phases)
            phased_plane_3x3(flat, plane, pitch, w_flat, np.uint64(m * 9), b, work, count)
            finish_rows(
                work, np.uint64(count), np.uint64(pitch), out_flat, np.uint64(job * out_h * out_w), out_h,
                out_w, kind, alpha, low, high,
            )  # fmt: skip


@numba.njit(parallel=True, nogil=True, cache=True, error_model="numpy", fastmath={"contract"})
def _flat_3x3(
    x: np.ndarray,
    weights: np.ndarray,
    bias: np.ndarray,
    has_bias: bool,
    stride_h: int,
    stride_w: int,
    pad_top: int,
    pad_left: int,
    dilation_h: int,
    dilation_w: int,
    kind: int,
    alpha: float,
    low: float,
    high: float,
    band_floats: int,
    workers: int,
    out: np.ndarray,
) -> None:
    """3x3 at stride 1 (most of MobileNetV2's layers), or 2 on outputs up to FLAT_S2_MAX_WIDTH wide:
    the padded plane is one long row. Output q = oy * width + ox reads padded element stride * q +
    tap offset, so a single pass over the plane's positions (those past each row's end computed and
    dropped) replaces out_h short rows, each with its own views and loop remainders."""
    channels, out_channels = x.shape[1], weights.shape[0]
    multiplier = out_channels // channels
    out_h, out_w = out.shape[2], out.shape[3]
    planes = x.shape[0] * out_channels
    workers = max(1, min(workers, planes))
    stride = stride_h  # 1, or 2 on narrow outputs (both directions)
    rows = (out_h - 1) * stride + 2 * dilation_h + 1
    cols = (out_w - 1) * stride + 2 * dilation_w + 1
    width = (cols + stride - 1) // stride * stride
    useful = np.uint64((out_h - 1) * width + out_w)  # positions up to the last output
    r1, r2 = dilation_h * width, 2 * dilation_h * width
    d1, d2 = dilation_w, 2 * dilation_w
    out_flat = out.reshape(-1)
    for worker in numba.prange(workers):
        # slack after the last row: the dropped positions of the last output row read past it
        storage = np.zeros(rows * width + 2 * dilation_w + 1, dtype=np.float32)
        padded = storage[: rows * width].reshape(rows, width)
        work = np.empty(out_h * width, dtype=np.float32)
        for job in range(worker * planes // workers, (worker + 1) * planes // workers):
            n, m = job // out_channels, job % out_channels
            b = bias[m] if has_bias else np.float32(0.0)
            fill_padded(x[n, m // multiplier], pad_top, pad_left, 1, padded)
            if stride == 2:
                _taps3_s2(
                    storage[0:], storage[d1:], storage[d2:],
                    storage[r1:], storage[r1 + d1 :], storage[r1 + d2 :],
                    storage[r2:], storage[r2 + d1 :], storage[r2 + d2 :],
                    weights[m], b, work[:useful],
                )  # fmt: skip
            else:
                _taps3(
                    storage[0:], storage[d1:], storage[d2:],
                    storage[r1:], storage[r1 + d1 :], storage[r1 + d2 :],
                    storage[r2:], storage[r2 + d1 :], storage[r2 + d2 :],
                    weights[m], b, work,
                )  # fmt: skip
            finish_rows(
                work, useful, np.uint64(width), out_flat, np.uint64(job * out_h * out_w), out_h, out_w, kind,
                alpha, low, high,
            )  # fmt: skip


@numba.njit(parallel=True, nogil=True, cache=True, error_model="numpy", fastmath={"contract"})
def _banded(
    x: np.ndarray,
    weights: np.ndarray,
    bias: np.ndarray,
    has_bias: bool,
    stride_h: int,
    stride_w: int,
    pad_top: int,
    pad_left: int,
    dilation_h: int,
    dilation_w: int,
    kind: int,
    alpha: float,
    low: float,
    high: float,
    band_floats: int,
    workers: int,
    out: np.ndarray,
) -> None:
    """Filters other than 3x3 (5x5, 7x7) at stride 1, or 2 without dilation: depthwise_bands.banded_plane
    over the zero-bordered plane (stride 1) or its four stride-2 phases (fill_phases)."""
    channels = x.shape[1]
    out_channels, kernel_h, kernel_w = weights.shape
    multiplier = out_channels // channels
    out_h, out_w = out.shape[2], out.shape[3]
    planes = x.shape[0] * out_channels
    workers = max(1, min(workers, planes))
    taps = kernel_h * kernel_w
    stride = stride_h  # 1, or 2 without dilation (both directions)
    split = stride == 2
    rows = (out_h - 1) * stride + (kernel_h - 1) * dilation_h + 1
    cols = (out_w - 1) * stride + (kernel_w - 1) * dilation_w + 1
    pitch = out_w + (kernel_w - 1) // 2 if split else cols  # positions per output row
    phase_rows = out_h + (kernel_h - 1) // 2 if split else 0
    plane = phase_rows * pitch
    band_rows = max(1, band_floats // pitch)
    # the filter's row and column offsets in the laid-out plane
    row_at = np.zeros(kernel_h, dtype=np.uint64)
    column_at = np.zeros(kernel_w, dtype=np.uint64)
    for ki in range(kernel_h):
        row_at[ki] = (ki % 2 * 2 * plane + ki // 2 * pitch) if split else ki * dilation_h * cols
    for kj in range(kernel_w):
        column_at[kj] = (kj % 2 * plane + kj // 2) if split else kj * dilation_w
    out_flat, w_flat = out.reshape(-1), weights.reshape(-1)
    for worker in numba.prange(workers):
        # slack after the last row: the dropped positions of the last output row read past it
        padded_rows = 0 if split else rows
        storage = np.zeros(padded_rows * cols + 2 * dilation_w + 1, dtype=np.float32)
        padded = storage[: padded_rows * cols].reshape(padded_rows, cols)
        work = np.empty(band_rows * pitch, dtype=np.float32)
        phases = np.zeros((4, phase_rows, pitch) if split else (4, 0, 0), dtype=np.float32)
        flat = phases.reshape(-1)
        for job in range(worker * planes // workers, (worker + 1) * planes // workers):
            n, m = job // out_channels, job % out_channels
            b = bias[m] if has_bias else np.float32(0.0)
            if split:
                fill_phases(x[n, m // multiplier], pad_top, pad_left, phases)
            else:
                fill_padded(x[n, m // multiplier], pad_top, pad_left, 1, padded)
            banded_plane(
                flat if split else storage, row_at, column_at, w_flat, np.uint64(m * taps), b, pitch,
                band_rows, work, out_flat, np.uint64(job * out_h * out_w), out_h, out_w, kind, alpha, low, high,
            )  # fmt: skip


@numba.njit(parallel=True, nogil=True, cache=True, error_model="numpy", fastmath={"contract"})
def _rows(
    x: np.ndarray,
    weights: np.ndarray,
    bias: np.ndarray,
    has_bias: bool,
    stride_h: int,
    stride_w: int,
    pad_top: int,
    pad_left: int,
    dilation_h: int,
    dilation_w: int,
    kind: int,
    alpha: float,
    low: float,
    high: float,
    band_floats: int,
    workers: int,
    out: np.ndarray,
) -> None:
    """The rest (stride 3, dilated stride 2, unequal strides): row by row over the padded plane, its
    columns dealt into ``stride_w`` phases (fill_padded), then the activation over the plane."""
    channels = x.shape[1]
    out_channels, kernel_h, kernel_w = weights.shape
    multiplier = out_channels // channels
    out_h, out_w = out.shape[2], out.shape[3]
    planes = x.shape[0] * out_channels
    workers = max(1, min(workers, planes))
    rows = (out_h - 1) * stride_h + (kernel_h - 1) * dilation_h + 1
    cols = (out_w - 1) * stride_w + (kernel_w - 1) * dilation_w + 1
    width = (cols + stride_w - 1) // stride_w * stride_w
    three = kernel_h == 3 and kernel_w == 3
    out_flat = out.reshape(-1)
    for worker in numba.prange(workers):
        padded = np.zeros((rows, width), dtype=np.float32)
        for job in range(worker * planes // workers, (worker + 1) * planes // workers):
            n, m = job // out_channels, job % out_channels
            b = bias[m] if has_bias else np.float32(0.0)
            fill_padded(x[n, m // multiplier], pad_top, pad_left, stride_w, padded)
            if three:
                _rows_3x3(padded, weights[m], b, stride_h, stride_w, dilation_h, dilation_w, out[n, m])
            else:
                _rows_any(padded, weights[m], b, stride_h, stride_w, dilation_h, dilation_w, out[n, m])
            activate_in_place(
                out_flat, np.uint64(job * out_h * out_w), np.uint64(out_h * out_w), kind, alpha, low, high
            )
