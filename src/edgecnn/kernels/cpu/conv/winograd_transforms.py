"""The transforms of Winograd's minimal filtering F(m x m, 3 x 3) for m = 2 and 4 (Lavin & Gray,
"Fast Algorithms for Convolutional Neural Networks", 2016), and the compiled layer loop.

A (m+2) x (m+2) input tile d and a 3x3 filter g give the m x m outputs of their correlation as
``A^T [(G g G^T) * (B^T d B)] A``. The filter transform runs once, at plan time; the input and
output transforms below are written out by hand (the matrices are mostly zeros and small
integers), each 2-D transform as the 1-D one on the columns, then on the rows.

Layout: the transforms work on whole channel vectors. The input is first copied, zero-padded, to
channels-last (H, W, C), so a tile's (m+2)^2 input pixels are contiguous C-vectors; each transform
point's tiles are a (tiles x C) matrix and the GEMMs compute (tiles x C) @ (C x M) per point; the
output transform reads M-vectors. Every loop of the transforms runs over channels, contiguous, so it
vectorises whatever the map size (7x7 maps have only 2 tiles per row: loops over tiles were short
and scalar, 4 ns per transformed value).

Over 400 lines on purpose: the hand-written transforms and the layer loop that inlines them share
the tile and channels-last layout; they change together.
"""

from __future__ import annotations

import numba
import numpy as np

from edgecnn.kernels.cpu.gemm.epilogue import activate
from edgecnn.kernels.cpu.gemm.microkernel import COLUMNS, ROWS, micro_kernel_strided_a
from edgecnn.kernels.cpu.system.threads import worker_share

FILTER_TRANSFORMS = {
    2: np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], dtype=np.float64),
    4: np.array(
        [
            [1 / 4, 0, 0],
            [-1 / 6, -1 / 6, -1 / 6],
            [-1 / 6, 1 / 6, -1 / 6],
            [1 / 24, 1 / 12, 1 / 6],
            [1 / 24, -1 / 12, 1 / 6],
            [0, 0, 1],
        ],
        dtype=np.float64,
    ),
}
"""G, per output tile size m: the filter transform (m+2 rows, 3 columns)."""

INPUT_TRANSFORMS = {
    2: np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], dtype=np.float64),
    4: np.array(
        [
            [4, 0, -5, 0, 1, 0],
            [0, -4, -4, 1, 1, 0],
            [0, 4, -4, -1, 1, 0],
            [0, -2, -1, 2, 1, 0],
            [0, 2, -1, -2, 1, 0],
            [0, 4, 0, -5, 0, 1],
        ],
        dtype=np.float64,
    ),
}
"""B^T, per m; the compiled ``input_1d`` applies exactly these rows (tests check they agree)."""

OUTPUT_TRANSFORMS = {
    2: np.array([[1, 1, 1, 0], [0, 1, -1, -1]], dtype=np.float64),
    4: np.array(
        [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]],
        dtype=np.float64,
    ),
}
"""A^T, per m; the compiled ``output_1d`` applies exactly these rows."""


def transform_filters(weights: np.ndarray, m: int) -> np.ndarray:
    """(M, C, 3, 3) filters -> (T, ceil(M/COLUMNS) * C * COLUMNS) float32, T = (m+2)^2: G g G^T for every
    filter, laid out for the micro-kernel's right operand: per transform point, U^T cut into
    COLUMNS-output-channel panels, each stored channel-major, the last panel padded with zero columns.

    The filters are first copied once into the panels' order, (3, 3, panel, C, COLUMNS); the
    transform acts on the two 3-long axes only, so two float32 GEMMs over all filters at once (G on
    the filter rows, then on the columns, one transform row at a time) write U straight into the
    packed layout. Done once per plan, yet on ResNet-50's 512 x 512 layers still the bulk of the
    plan's time (the float64 einsum this replaces cost 0.43 s of the first inference). The float32
    rounding it adds is far inside the error bounds tests/kernels/cpu/conv/test_winograd.py checks."""
    out_channels, in_channels = weights.shape[0], weights.shape[1]
    t = m + 2
    g = FILTER_TRANSFORMS[m].astype(np.float32)
    panels = -(-out_channels // COLUMNS)
    w = weights.astype(np.float32, copy=False)
    if panels * COLUMNS != out_channels:
        w = np.concatenate([w, np.zeros((panels * COLUMNS - out_channels, *w.shape[1:]), np.float32)])
    taps = np.ascontiguousarray(w.reshape(panels, COLUMNS, in_channels, 3, 3).transpose(3, 4, 0, 2, 1))
    rows = (g @ taps.reshape(3, -1)).reshape(t, 3, -1)  # (t1, j, panel*C*16): G on the filter rows
    u = np.empty((t * t, rows.shape[2]), dtype=np.float32)
    for t1 in range(t):
        np.matmul(g, rows[t1], out=u[t1 * t : (t1 + 1) * t])  # G on the columns: point t1*t + t2
    return u


CHANNEL_BLOCK = 128
"""Channels per pass of ``pad_channels_last`` over a row: 128 source lines, 8 KiB of L1."""

PAGE_BYTES = 4096
"""L1 sets repeat every page: lines a whole number of pages apart compete for one set's 12 ways.
On planes of whole pages (VGG-16's 224x224: 49 pages) ``pad_channels_last`` and ``store_tile``
go through the values a plane apart in another order (their docstrings say why)."""

TILE_GROUP_FLOATS = 16
"""Output columns (one 64-byte line) stored together on planes of whole pages: TILE_GROUP_FLOATS // m
side-by-side tiles per group (store_tiles_by_channel)."""

DEPTH_BLOCK = 256
"""Input channels per micro-kernel pass (a COLUMNS-channel panel of one point's filters: 16 or 32 KiB)."""


@numba.njit(cache=True)
def point_gemm(
    v: np.ndarray,  # flat: the point's transformed tiles, tile q's C-vector at q*C
    tiles: int,
    in_channels: int,
    u: np.ndarray,  # flat: the point's filter panels (pack_filters)
    oc0: int,  # first output channel (a multiple of COLUMNS)
    oc1: int,
    products: np.ndarray,  # flat: tile q's channel oc0 + o at q*ldc + o
    ldc: int,
) -> None:
    """products[q, o] = sum_c v[q, c] * U[oc0 + o, c] for q < tiles, oc0 <= oc0 + o < oc1: the
    transformed tiles read in place, row-major, ROWS at a time; the filters' panels in COLUMNS channels.
    Rows past ``tiles`` are read (they lie inside v's buffer) and never stored."""
    for k0 in range(0, in_channels, DEPTH_BLOCK):
        steps = min(DEPTH_BLOCK, in_channels - k0)
        for j0 in range(oc0, oc1, COLUMNS):
            b_at = (j0 // COLUMNS) * in_channels * COLUMNS + k0 * COLUMNS
            width = min(COLUMNS, oc1 - j0)
            for q0 in range(0, tiles, ROWS):
                micro_kernel_strided_a(
                    steps,
                    v,
                    q0 * in_channels + k0,
                    in_channels,
                    u,
                    b_at,
                    COLUMNS,
                    products,
                    q0 * ldc + j0 - oc0,
                    ldc,
                    k0 > 0,
                    min(ROWS, tiles - q0),
                    width,
                )


@numba.njit(inline="always", cache=True)
def six_views(
    a: np.ndarray, start: int, step: int, length: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """a[start + j*step : start + j*step + length] for j < 6 (views past the end come out short or
    empty and are never indexed: F(2x2) uses four)."""
    return (
        a[start : start + length],
        a[start + step : start + step + length],
        a[start + 2 * step : start + 2 * step + length],
        a[start + 3 * step : start + 3 * step + length],
        a[start + 4 * step : start + 4 * step + length],
        a[start + 5 * step : start + 5 * step + length],
    )


@numba.njit(inline="always", cache=True)
def input_1d(
    m: int, src: np.ndarray, s0: int, step: int, dst: np.ndarray, d0: int, dstep: int, length: int
) -> None:
    """dst[d0 + e*dstep + c] = (B^T v)_e, v_j = src[s0 + j*step + c], for every c < length (flat float32
    arrays): the 1-D input transform of ``length`` vectors at once.

    Each vector is sliced out first and each output written by a loop of its own: indexing the flat
    arrays at computed offsets kept LLVM's vectorised loop from running (2 ns per value; 0.26 ns so)."""
    v0, v1, v2, v3, v4, v5 = six_views(src, s0, step, length)
    e0, e1, e2, e3, e4, e5 = six_views(dst, d0, dstep, length)
    if m == 2:
        for c in range(length):
            e0[c] = v0[c] - v2[c]
        for c in range(length):
            e1[c] = v1[c] + v2[c]
        for c in range(length):
            e2[c] = v2[c] - v1[c]
        for c in range(length):
            e3[c] = v1[c] - v3[c]
        return
    four, five, two = np.float32(4.0), np.float32(5.0), np.float32(2.0)
    for c in range(length):
        e0[c] = four * v0[c] - five * v2[c] + v4[c]
    for c in range(length):
        e1[c] = v3[c] + v4[c] - four * (v1[c] + v2[c])
    for c in range(length):
        e2[c] = four * (v1[c] - v2[c]) - v3[c] + v4[c]
    for c in range(length):
        e3[c] = two * (v3[c] - v1[c]) - v2[c] + v4[c]
    for c in range(length):
        e4[c] = two * (v1[c] - v3[c]) - v2[c] + v4[c]
    for c in range(length):
        e5[c] = four * v1[c] - five * v3[c] + v5[c]


@numba.njit(inline="always", cache=True)
def output_1d(
    m: int, src: np.ndarray, s0: int, step: int, dst: np.ndarray, d0: int, dstep: int, length: int
) -> None:
    """dst[d0 + a*dstep + c] = (A^T v)_a, v_j = src[s0 + j*step + c], for every c < length (written as
    input_1d is)."""
    v0, v1, v2, v3, v4, v5 = six_views(src, s0, step, length)
    e0, e1, e2, e3 = six_views(dst, d0, dstep, length)[:4]
    if m == 2:
        for c in range(length):
            e0[c] = v0[c] + v1[c] + v2[c]
        for c in range(length):
            e1[c] = v1[c] - v2[c] - v3[c]
        return
    two, four, eight = np.float32(2.0), np.float32(4.0), np.float32(8.0)
    for c in range(length):
        e0[c] = v0[c] + v1[c] + v2[c] + v3[c] + v4[c]
    for c in range(length):
        e1[c] = v1[c] - v2[c] + two * (v3[c] - v4[c])
    for c in range(length):
        e2[c] = v1[c] + v2[c] + four * (v3[c] + v4[c])
    for c in range(length):
        e3[c] = v1[c] - v2[c] + eight * (v3[c] - v4[c]) + v5[c]


@numba.njit(cache=True)
def input_tile(
    m: int,
    xt: np.ndarray,
    base: int,
    row: int,
    channels: int,
    tmp: np.ndarray,
    v: np.ndarray,
    v0: int,
    vrow: int,
) -> None:
    """B^T d B for one tile of every channel: d's pixel (i, j) is the C-vector at
    xt[base + i*row + j*channels]; transformed point (i, e) goes to v[v0 + (i*t + e)*vrow + c]."""
    t = m + 2
    for j in range(t):  # down each column of the tile: tmp[(i*t + j)*C + c]
        input_1d(m, xt, base + j * channels, row, tmp, j * channels, t * channels, channels)
    for i in range(t):  # across each row
        input_1d(m, tmp, i * t * channels, channels, v, v0 + i * t * vrow, vrow, channels)


@numba.njit(cache=True)
def output_tile(
    m: int, products: np.ndarray, p0: int, prow: int, width: int, tmp: np.ndarray, result: np.ndarray
) -> None:
    """A^T M A for one tile of ``width`` output channels: point k's M-vector is
    products[p0 + k*prow + o]; output pixel (a, b) goes to result[(a*m + b)*width + o]."""
    t = m + 2
    for j in range(t):  # down each column: tmp[(a*t + j)*width + o]
        output_1d(m, products, p0 + j * prow, t * prow, tmp, j * width, t * width, width)
    for a in range(m):  # across each row
        output_1d(m, tmp, a * t * width, width, result, a * m * width, width, width)


@numba.njit(cache=True)
def pad_channels_last(
    x: np.ndarray, pad_top: int, pad_left: int, first: int, last: int, xt: np.ndarray
) -> None:
    """Rows first..last-1 of xt (N*Hp, Wp, C) = x (N, C, H, W) moved to channels-last at
    (pad_top, pad_left) of each image's (Hp, Wp) frame, zeros around it."""
    channels, height, width = x.shape[1], x.shape[2], x.shape[3]
    frame_h, frame_w = xt.shape[0] // x.shape[0], xt.shape[1]
    zero = np.float32(0.0)
    for r in range(first, last):
        n, y = r // frame_h, r % frame_h - pad_top
        row = xt[r].reshape(frame_w * channels)
        if y < 0 or y >= height:
            row[:] = zero
            continue
        row[: pad_left * channels] = zero
        row[(pad_left + width) * channels :] = zero
        source = x[n].reshape(-1)
        plane = height * width
        start = y * width
        if (plane * 4) % PAGE_BYTES == 0:
            # one source line at a time, all of it: 16 j of each channel, stores a row apart
            for j0 in range(0, width, 16):
                j1 = min(j0 + 16, width)
                for c in range(channels):
                    at = c * plane + start
                    for j in range(j0, j1):
                        row[np.uint64((pad_left + j) * channels + c)] = source[np.uint64(at + j)]
            continue
        # contiguous stores, loads a plane apart: each loaded line is reused for 16 j, so a block's
        # CHANNEL_BLOCK lines stay in L1 until then (all of a 1024-channel row's lines would not;
        # nor would the lines of planes of whole pages, all in one L1 set: see above)
        for c0 in range(0, channels, CHANNEL_BLOCK):
            c1 = min(c0 + CHANNEL_BLOCK, channels)
            for j in range(width):
                target = (pad_left + j) * channels
                for c in range(c0, c1):
                    row[np.uint64(target + c)] = source[np.uint64(c * plane + start + j)]


@numba.njit(cache=True)
def store_tile(
    result: np.ndarray,
    width: int,
    n: int,
    oc0: int,
    y0: int,
    x0: int,
    m: int,
    bias: np.ndarray,
    has_bias: bool,
    kind: int,
    alpha: float,
    low: float,
    high: float,
    out: np.ndarray,
) -> None:
    """out[n, oc0 + o, y0 + a, x0 + b] = act(result[(a*m + b)*width + o] + bias), clipped at the edges
    (one store per output value, a plane apart: the one scattered pass of the output). Where planes
    are whole pages, ``store_tile_by_channel`` instead."""
    out_h, out_w = out.shape[2], out.shape[3]
    plane = out_h * out_w
    flat = out.reshape(-1)
    zero = np.float32(0.0)
    for a in range(min(m, out_h - y0)):
        for b in range(min(m, out_w - x0)):
            k = (a * m + b) * width
            base = (n * out.shape[1] + oc0) * plane + (y0 + a) * out_w + x0 + b
            if has_bias:
                for o in range(width):
                    result[k + o] += bias[oc0 + o]
            if kind == 0:
                for o in range(width):
                    flat[np.uint64(base + o * plane)] = result[k + o]
            elif kind == 1:
                for o in range(width):
                    value = result[k + o]
                    flat[np.uint64(base + o * plane)] = zero if value <= zero else value
            elif kind == 2:  # leaky ReLU (tiny-YOLO): through activate() as slow as the GEMMs
                slope = np.float32(alpha)
                for o in range(width):
                    value = result[k + o]
                    flat[np.uint64(base + o * plane)] = value if value >= zero else value * slope
            else:
                for o in range(width):
                    flat[np.uint64(base + o * plane)] = activate(result[k + o], kind, alpha, low, high)


@numba.njit(cache=True)
def store_tiles_by_channel(
    result: np.ndarray,
    tiles: int,
    width: int,
    n: int,
    oc0: int,
    y0: int,
    x0: int,
    m: int,
    bias: np.ndarray,
    has_bias: bool,
    kind: int,
    alpha: float,
    low: float,
    high: float,
    out: np.ndarray,
    line: np.ndarray,  # (>= tiles * m,) scratch
) -> None:
    """``store_tile`` for ``tiles`` side-by-side tiles (tile g's values from g*m*m*width in
    ``result``), for planes of whole pages (PAGE_BYTES; VGG-16's 224x224 maps). There the stores a
    plane apart all fall into one L1 set, so one tile's m-value runs left each line to be evicted
    and fetched again for the next tile: here each channel's output row across the group is gathered
    into ``line``, biased and activated there (the activation's branch once per row, not per value),
    then stored in one run of whole lines (TILE_GROUP_FLOATS // m tiles per group)."""
    out_h, out_w = out.shape[2], out.shape[3]
    plane = out_h * out_w
    flat = out.reshape(-1)
    zero = np.float32(0.0)
    rows = min(m, out_h - y0)
    size = m * m * width
    columns = min(tiles * m, out_w - x0)
    for o in range(width):
        shift = bias[oc0 + o] if has_bias else zero
        for a in range(rows):
            for c in range(columns):
                g, b = divmod(c, m)
                line[c] = result[g * size + (a * m + b) * width + o] + shift
            if kind == 1:
                for c in range(columns):
                    line[c] = max(line[c], zero)
            elif kind == 2:
                slope = np.float32(alpha)
                for c in range(columns):
                    line[c] = line[c] if line[c] >= zero else line[c] * slope
            elif kind != 0:
                for c in range(columns):
                    line[c] = activate(line[c], kind, alpha, low, high)
            at = np.uint64((n * out.shape[1] + oc0 + o) * plane + (y0 + a) * out_w + x0)
            for c in range(np.uint64(columns)):
                flat[at + c] = line[c]


def _winograd_conv_2d(
    x: np.ndarray,  # (N, C, H, W)
    u: np.ndarray,  # (T, panels): pack_filters of the transformed filters
    bias: np.ndarray,  # (M,)
    has_bias: bool,
    m: int,  # output tile size: 2 or 4
    pad_top: int,
    pad_left: int,
    kind: int,
    alpha: float,
    low: float,
    high: float,
    tile_step: int,  # tiles per chunk
    oc_step: int,  # output channels per task
    xt: np.ndarray,  # (N * Hp, Wp, C) scratch: the padded channels-last input, Hp = tiles_h*m + 2
    regions: np.ndarray,  # (workers, >= T * (v_row + m_row)) scratch: each worker's own row
    v_row: int,  # floats per transform point of the transformed input, >= tile_step * C
    m_row: int,  # floats per transform point of the products, >= tile_step * oc_step
    out: np.ndarray,  # (N, M, OH, OW), written
) -> None:
    """The input moved to channels-last (rows spread over the threads), then tasks (a chunk of tiles
    across images x a block of output channels) spread over numba's threads: the chunk's input
    transform (once per chunk and thread), one GEMM (tiles x C) @ (C x M) per transform point on the
    micro-kernel (point_gemm), the output transform with the epilogue. Output channels are split only when
    there are fewer chunks than threads (small maps), where it also halves the transformed filters
    each thread streams through."""
    t = m + 2
    points = t * t
    batch, channels = x.shape[0], x.shape[1]
    out_channels, out_h, out_w = out.shape[1], out.shape[2], out.shape[3]
    tiles_h, tiles_w = (out_h + m - 1) // m, (out_w + m - 1) // m
    tiles_per_image = tiles_h * tiles_w
    tiles = batch * tiles_per_image
    frame_h, frame_w = xt.shape[0] // batch, xt.shape[1]
    workers = regions.shape[0]
    rows = batch * frame_h
    paged = (out_h * out_w * 4) % PAGE_BYTES == 0
    for worker in numba.prange(workers):
        pad_channels_last(x, pad_top, pad_left, worker * rows // workers, (worker + 1) * rows // workers, xt)
    flat = xt.reshape(-1)
    row = frame_w * channels
    chunks = (tiles + tile_step - 1) // tile_step
    blocks = (out_channels + oc_step - 1) // oc_step
    for worker in numba.prange(workers):
        region = regions[worker]
        vrow, prow = v_row, m_row
        vflat, pflat = region[: points * vrow], region[points * vrow : points * (vrow + prow)]
        tmp = np.empty(points * max(channels, oc_step), dtype=np.float32)
        group = TILE_GROUP_FLOATS // m if paged else 1  # tiles stored together
        result = np.empty(group * m * m * oc_step, dtype=np.float32)
        line = np.empty(group * m, dtype=np.float32)
        transformed = -1
        first, end = worker_share(worker, workers, chunks * blocks)
        for task in range(first, end):
            chunk = task // blocks
            oc0 = (task % blocks) * oc_step
            oc1 = min(oc0 + oc_step, out_channels)
            width = oc1 - oc0
            p0 = chunk * tile_step
            count = min(tile_step, tiles - p0)
            if chunk != transformed:
                for q in range(count):
                    n, r = divmod(p0 + q, tiles_per_image)
                    ty, tx = divmod(r, tiles_w)
                    base = (n * frame_h + ty * m) * row + tx * m * channels
                    input_tile(m, flat, base, row, channels, tmp, vflat, q * channels, vrow)
                transformed = chunk
            for k in range(points):
                point_gemm(vflat[k * vrow :], count, channels, u[k], oc0, oc1, pflat[k * prow :], oc_step)
            if paged:
                q = 0
                while q < count:  # runs of side-by-side tiles, each ending at a multiple of group
                    n, r = divmod(p0 + q, tiles_per_image)
                    ty, tx = divmod(r, tiles_w)
                    run = min(group - tx % group, count - q, tiles_w - tx)
                    for g in range(run):
                        output_tile(
                            m, pflat, (q + g) * oc_step, prow, width, tmp, result[g * m * m * width :]
                        )
                    store_tiles_by_channel(
                        result,
                        run,
                        width,
                        n,
                        oc0,
                        ty * m,
                        tx * m,
                        m,
                        bias,
                        has_bias,
                        kind,
                        alpha,
                        low,
                        high,
                        out,
                        line,
                    )
                    q += run
                continue
            for q in range(count):
                n, r = divmod(p0 + q, tiles_per_image)
                ty, tx = divmod(r, tiles_w)
                output_tile(m, pflat, q * oc_step, prow, width, tmp, result)
                store_tile(
                    result, width, n, oc0, ty * m, tx * m, m, bias, has_bias, kind, alpha, low, high, out
                )


winograd_conv_2d = numba.njit(parallel=True, nogil=True, cache=True)(_winograd_conv_2d)
"""nogil: the batch-split runner calls it from several threads."""
