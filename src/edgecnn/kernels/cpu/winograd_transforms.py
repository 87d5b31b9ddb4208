"""The transforms of Winograd's minimal filtering F(m x m, 3 x 3) for m = 2 and 4 (Lavin & Gray,
"Fast Algorithms for Convolutional Neural Networks", 2016), and the compiled layer loop.

A (m+2) x (m+2) input tile d and a 3x3 filter g give the m x m outputs of their correlation as
``A^T [(G g G^T) * (B^T d B)] A``. The filter transform runs once, at plan time, in float64; the
input and output transforms below are written out by hand (the matrices are mostly zeros and
small integers), each 2-D transform as the 1-D one on the columns, then on the rows.
"""

from __future__ import annotations

import numba
import numpy as np

from edgecnn.kernels.cpu.blas import gemm_into
from edgecnn.kernels.cpu.epilogue import activate

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
"""B^T, per m; the compiled ``across_input`` applies exactly these rows (tests check they agree)."""

OUTPUT_TRANSFORMS = {
    2: np.array([[1, 1, 1, 0], [0, 1, -1, -1]], dtype=np.float64),
    4: np.array(
        [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]],
        dtype=np.float64,
    ),
}
"""A^T, per m; the compiled ``across_output`` applies exactly these rows."""


def transform_filters(weights: np.ndarray, m: int) -> np.ndarray:
    """(M, C, 3, 3) filters -> (T, M, C) float32, T = (m+2)^2: one GEMM operand per transform point.

    G g G^T for every (M, C) filter as two large float32 GEMMs (tensordot), done once per plan: on
    ResNet-50's 3x3 layers the float64 einsum this replaces cost 0.43 s of the first inference; the
    float32 rounding it adds is far inside the error bounds tests/kernels/test_winograd.py checks."""
    g = FILTER_TRANSFORMS[m].astype(np.float32)
    rows = np.tensordot(g, weights.astype(np.float32, copy=False), axes=([1], [2]))  # (t, M, C, 3)
    u = np.tensordot(rows, g, axes=([3], [1])).transpose(0, 3, 1, 2)  # (t, t, M, C)
    t = m + 2
    return np.ascontiguousarray(u.reshape(t * t, weights.shape[0], weights.shape[1]))


@numba.njit(inline="always", cache=True)
def across_input(m: int, src: np.ndarray, run: int, v: np.ndarray, point0: int, offset: int) -> None:
    """v[point0 + e, offset + k] = (B^T s)_e for s = src[k*m : k*m + m+2], for each tile k < run: the
    horizontal half of the input transform for one row of a run of tiles. ``v`` is C-contiguous,
    one row per transform point, so every store stream is contiguous in k."""
    if m == 2:
        for k in range(run):
            j = np.uint64(2 * k)
            o = np.uint64(offset + k)
            v0, v1, v2, v3 = src[j], src[j + np.uint64(1)], src[j + np.uint64(2)], src[j + np.uint64(3)]
            v[point0, o] = v0 - v2
            v[point0 + 1, o] = v1 + v2
            v[point0 + 2, o] = v2 - v1
            v[point0 + 3, o] = v1 - v3
        return
    four, five, two = np.float32(4.0), np.float32(5.0), np.float32(2.0)
    for k in range(run):
        j = np.uint64(4 * k)
        o = np.uint64(offset + k)
        v0, v1, v2 = src[j], src[j + np.uint64(1)], src[j + np.uint64(2)]
        v3, v4, v5 = src[j + np.uint64(3)], src[j + np.uint64(4)], src[j + np.uint64(5)]
        v[point0, o] = four * v0 - five * v2 + v4
        v[point0 + 1, o] = v3 + v4 - four * (v1 + v2)
        v[point0 + 2, o] = four * (v1 - v2) - v3 + v4
        v[point0 + 3, o] = two * (v3 - v1) - v2 + v4
        v[point0 + 4, o] = two * (v1 - v3) - v2 + v4
        v[point0 + 5, o] = four * v1 - five * v3 + v5


@numba.njit(inline="always", cache=True)
def across_output(m: int, products: np.ndarray, point0: int, offset: int, run: int, dst: np.ndarray) -> None:
    """dst[k*m : k*m + m] = A^T p for p = products[point0 : point0 + m+2, offset + k], for each tile
    k < run: the horizontal half of the output transform for one row of a run of tiles (every load
    stream contiguous in k, the stores contiguous all together)."""
    if m == 2:
        for k in range(run):
            o = np.uint64(offset + k)
            v0, v1, v2, v3 = (
                products[point0, o],
                products[point0 + 1, o],
                products[point0 + 2, o],
                products[point0 + 3, o],
            )
            j = np.uint64(2 * k)
            dst[j] = v0 + v1 + v2
            dst[j + np.uint64(1)] = v1 - v2 - v3
        return
    two, four, eight = np.float32(2.0), np.float32(4.0), np.float32(8.0)
    for k in range(run):
        o = np.uint64(offset + k)
        v0, v1, v2 = products[point0, o], products[point0 + 1, o], products[point0 + 2, o]
        v3, v4, v5 = products[point0 + 3, o], products[point0 + 4, o], products[point0 + 5, o]
        s12, d12, s34, d34 = v1 + v2, v1 - v2, v3 + v4, v3 - v4
        j = np.uint64(4 * k)
        dst[j] = v0 + s12 + s34
        dst[j + np.uint64(1)] = d12 + two * d34
        dst[j + np.uint64(2)] = s12 + four * s34
        dst[j + np.uint64(3)] = d12 + eight * d34 + v5


@numba.njit(inline="always", cache=True)
def row_segment(p: int, tiles_w: int, tiles_per_image: int, remaining: int) -> tuple[int, int, int, int]:
    """(image, tile row, first tile column, tiles) of the run of tiles from tile ``p`` that stays
    in one tile row and has at most ``remaining`` tiles."""
    n = p // tiles_per_image
    r = p - n * tiles_per_image
    ty = r // tiles_w
    tx = r - ty * tiles_w
    return n, ty, tx, min(tiles_w - tx, remaining)


@numba.njit(cache=True)
def columns_input(m: int, rows: np.ndarray, strip: np.ndarray, span: int) -> None:
    """strip[:, j] = B^T rows[:, j] for j < span: the vertical half of the input transform for a
    whole strip of tiles at once (contiguous in j, so it vectorises)."""
    if m == 2:
        for j in range(span):
            r0, r1, r2, r3 = rows[0, j], rows[1, j], rows[2, j], rows[3, j]
            strip[0, j] = r0 - r2
            strip[1, j] = r1 + r2
            strip[2, j] = r2 - r1
            strip[3, j] = r1 - r3
    else:
        four, five, two = np.float32(4.0), np.float32(5.0), np.float32(2.0)
        for j in range(span):
            r0, r1, r2, r3, r4, r5 = rows[0, j], rows[1, j], rows[2, j], rows[3, j], rows[4, j], rows[5, j]
            strip[0, j] = four * r0 - five * r2 + r4
            strip[1, j] = r3 + r4 - four * (r1 + r2)
            strip[2, j] = four * (r1 - r2) - r3 + r4
            strip[3, j] = two * (r3 - r1) - r2 + r4
            strip[4, j] = two * (r1 - r3) - r2 + r4
            strip[5, j] = four * r1 - five * r3 + r5


@numba.njit(cache=True)
def columns_output(m: int, i: int, strip: np.ndarray, span: int, result: np.ndarray) -> None:
    """result[j] = (A^T strip[:, j])_i for j < span: output row i of a strip of tiles (one loop per
    row, without branches, so that it vectorises)."""
    r0, r1, r2, r3 = strip[0], strip[1], strip[2], strip[3]
    if m == 2:
        if i == 0:
            for j in range(span):
                result[j] = r0[j] + r1[j] + r2[j]
        else:
            for j in range(span):
                result[j] = r1[j] - r2[j] - r3[j]
        return
    r4, r5 = strip[4], strip[5]
    if i == 0:
        for j in range(span):
            result[j] = r0[j] + r1[j] + r2[j] + r3[j] + r4[j]
    elif i == 1:
        for j in range(span):
            result[j] = r1[j] - r2[j] + np.float32(2.0) * (r3[j] - r4[j])
    elif i == 2:
        for j in range(span):
            result[j] = r1[j] + r2[j] + np.float32(4.0) * (r3[j] + r4[j])
    else:
        for j in range(span):
            result[j] = r1[j] - r2[j] + np.float32(8.0) * (r3[j] - r4[j]) + r5[j]


@numba.njit(cache=True)
def input_tiles(
    x: np.ndarray,  # (N, C, H, W)
    m: int,
    pad_top: int,
    pad_left: int,
    tiles_w: int,
    tiles_per_image: int,
    p0: int,
    count: int,
    step: int,  # row length of one channel's tiles in ``v``
    rows: np.ndarray,  # (t, >= strip width) scratch
    strip: np.ndarray,  # (t, >= strip width) scratch
    v: np.ndarray,  # (T, >= C * step), C-contiguous: v[point, c*step + q] for tile p0 + q, written
) -> None:
    """B^T d B for ``count`` consecutive tiles of every channel, a run of tiles within one tile row
    at a time: copy the run's t input rows (zeros for the padding), transform down the columns for
    the whole run, then across each tile's rows."""
    t = m + 2
    channels, height, width = x.shape[1], x.shape[2], x.shape[3]
    q = 0
    while q < count:
        n, ty, tx, run = row_segment(p0 + q, tiles_w, tiles_per_image, count - q)
        y0 = ty * m - pad_top
        x0 = tx * m - pad_left
        span = run * m + 2
        lo = min(max(-x0, 0), span)  # the columns inside the input: lo .. hi-1
        hi = max(min(width - x0, span), lo)
        for c in range(channels):
            plane = x[n, c]
            for i in range(t):
                y = y0 + i
                row = rows[i]
                if 0 <= y < height:
                    for j in range(lo):
                        row[j] = np.float32(0.0)
                    for j in range(lo, hi):
                        row[j] = plane[y, x0 + j]
                    for j in range(hi, span):
                        row[j] = np.float32(0.0)
                else:
                    for j in range(span):
                        row[j] = np.float32(0.0)
            columns_input(m, rows, strip, span)
            for i in range(t):  # across: t output streams per strip row, contiguous in the tiles
                across_input(m, strip[i], run, v, i * t, c * step + q)
        q += run


@numba.njit(cache=True)
def output_tiles(
    products: np.ndarray,  # (T, >= (oc1 - oc0) * step), C-contiguous: the GEMMs' results
    step: int,  # row length of one output channel's tiles in ``products``
    oc0: int,
    oc1: int,
    m: int,
    tiles_w: int,
    tiles_per_image: int,
    p0: int,
    count: int,
    bias: np.ndarray,
    has_bias: bool,
    kind: int,
    alpha: float,
    low: float,
    high: float,
    strip: np.ndarray,  # (t, >= strip width) scratch
    result: np.ndarray,  # (>= strip width,) scratch
    out: np.ndarray,  # (N, M, OH, OW), written
) -> None:
    """A^T M A, then bias and activation, for ``count`` tiles of output channels oc0 .. oc1-1, a run
    of tiles within one tile row at a time: across each tile's rows into a strip, then down the
    strip's columns straight into the output rows (clipped at the output's edge)."""
    t = m + 2
    out_h, out_w = out.shape[2], out.shape[3]
    q = 0
    while q < count:
        n, ty, tx, run = row_segment(p0 + q, tiles_w, tiles_per_image, count - q)
        y0 = ty * m
        x0 = tx * m
        span = min(run * m, out_w - x0)
        height = min(m, out_h - y0)
        for oc in range(oc0, oc1):
            b = bias[oc] if has_bias else np.float32(0.0)
            for i in range(t):  # across: t product streams per strip row, contiguous in the tiles
                across_output(m, products, i * t, (oc - oc0) * step + q, run, strip[i])
            plane = out[n, oc]
            for i in range(height):
                columns_output(m, i, strip, span, result)
                target = plane[y0 + i, x0 : x0 + span]
                if kind == 0:
                    for j in range(span):
                        target[j] = result[j] + b
                elif kind == 1:
                    for j in range(span):
                        value = result[j] + b
                        target[j] = np.float32(0.0) if value <= np.float32(0.0) else value
                else:
                    for j in range(span):
                        target[j] = activate(result[j] + b, kind, alpha, low, high)
        q += run


@numba.njit(
    parallel=True, nogil=True, cache=True
)  # nogil: the batch-split runner calls it from several threads
def winograd_conv_2d(
    x: np.ndarray,  # (N, C, H, W)
    u: np.ndarray,  # (T, M, C): transformed filters
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
    v_buffers: np.ndarray,  # (workers, T, >= C * tile_step) scratch, C-contiguous
    m_buffers: np.ndarray,  # (workers, T, >= oc_step * tile_step) scratch, C-contiguous
    out: np.ndarray,  # (N, M, OH, OW), written
) -> None:
    """Tasks (a chunk of tiles across images x a block of output channels) spread over numba's
    threads: the chunk's input transform (once per chunk and thread), one single-threaded BLAS GEMM
    per transform point, the output transform with the epilogue. Output channels are split only
    when there are fewer chunks than threads (small maps), where it also halves the transformed
    filters each thread streams through."""
    t = m + 2
    transform_points = t * t
    in_channels = x.shape[1]
    out_channels, out_h, out_w = out.shape[1], out.shape[2], out.shape[3]
    tiles_h = (out_h + m - 1) // m
    tiles_w = (out_w + m - 1) // m
    tiles_per_image = tiles_h * tiles_w
    tiles = x.shape[0] * tiles_per_image
    chunks = (tiles + tile_step - 1) // tile_step
    blocks = (out_channels + oc_step - 1) // oc_step
    workers = v_buffers.shape[0]
    for worker in numba.prange(workers):
        v = v_buffers[worker]
        products = m_buffers[worker]
        width = min(tile_step, tiles_w) * m + 2
        rows = np.empty((t, width), dtype=np.float32)
        strip = np.empty((t, width), dtype=np.float32)
        result = np.empty(width, dtype=np.float32)
        transformed = -1
        for task in range(worker, chunks * blocks, workers):
            chunk = task // blocks
            oc0 = (task % blocks) * oc_step
            oc1 = min(oc0 + oc_step, out_channels)
            p0 = chunk * tile_step
            count = min(tile_step, tiles - p0)
            if chunk != transformed:
                input_tiles(
                    x, m, pad_top, pad_left, tiles_w, tiles_per_image, p0, count, tile_step, rows, strip, v
                )
                transformed = chunk
            for k in range(transform_points):
                gemm_into(
                    u[k, oc0:oc1],
                    v[k, : in_channels * tile_step].reshape(in_channels, tile_step)[:, :count],
                    False,
                    products[k, : (oc1 - oc0) * tile_step].reshape(oc1 - oc0, tile_step)[:, :count],
                )
            output_tiles(
                products,
                tile_step,
                oc0,
                oc1,
                m,
                tiles_w,
                tiles_per_image,
                p0,
                count,
                bias,
                has_bias,
                kind,
                alpha,
                low,
                high,
                strip,
                result,
                out,
            )
