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
    """(M, C, 3, 3) filters -> (T, M, C) float32, T = (m+2)^2: one GEMM operand per transform point.

    Computed in float64 so that the only rounding is the final cast."""
    g = FILTER_TRANSFORMS[m]
    u = np.einsum("ai,mcij,bj->abmc", g, weights.astype(np.float64), g)
    t = m + 2
    return np.ascontiguousarray(u.reshape(t * t, weights.shape[0], weights.shape[1]), dtype=np.float32)


@numba.njit(inline="always", cache=True)
def input_1d(m: int, src: np.ndarray, s0: int, step: int, dst: np.ndarray, d0: int, dstep: int) -> None:
    """dst[d0 + i*dstep] = (B^T v)_i for v = src[s0 + j*step], j < m+2 (flat float32 arrays)."""
    if m == 2:
        v0, v1, v2, v3 = src[s0], src[s0 + step], src[s0 + 2 * step], src[s0 + 3 * step]
        dst[d0] = v0 - v2
        dst[d0 + dstep] = v1 + v2
        dst[d0 + 2 * dstep] = v2 - v1
        dst[d0 + 3 * dstep] = v1 - v3
    else:
        v0, v1, v2 = src[s0], src[s0 + step], src[s0 + 2 * step]
        v3, v4, v5 = src[s0 + 3 * step], src[s0 + 4 * step], src[s0 + 5 * step]
        four, five, two = np.float32(4.0), np.float32(5.0), np.float32(2.0)
        dst[d0] = four * v0 - five * v2 + v4
        dst[d0 + dstep] = v3 + v4 - four * (v1 + v2)
        dst[d0 + 2 * dstep] = four * (v1 - v2) - v3 + v4
        dst[d0 + 3 * dstep] = two * (v3 - v1) - v2 + v4
        dst[d0 + 4 * dstep] = two * (v1 - v3) - v2 + v4
        dst[d0 + 5 * dstep] = four * v1 - five * v3 + v5


@numba.njit(inline="always", cache=True)
def output_1d(m: int, src: np.ndarray, s0: int, step: int, dst: np.ndarray, d0: int, dstep: int) -> None:
    """dst[d0 + i*dstep] = (A^T v)_i for v = src[s0 + j*step], j < m+2 (flat float32 arrays)."""
    if m == 2:
        v0, v1, v2, v3 = src[s0], src[s0 + step], src[s0 + 2 * step], src[s0 + 3 * step]
        dst[d0] = v0 + v1 + v2
        dst[d0 + dstep] = v1 - v2 - v3
    else:
        v0, v1, v2 = src[s0], src[s0 + step], src[s0 + 2 * step]
        v3, v4, v5 = src[s0 + 3 * step], src[s0 + 4 * step], src[s0 + 5 * step]
        two, four, eight = np.float32(2.0), np.float32(4.0), np.float32(8.0)
        s12, d12, s34, d34 = v1 + v2, v1 - v2, v3 + v4, v3 - v4
        dst[d0] = v0 + s12 + s34
        dst[d0 + dstep] = d12 + two * d34
        dst[d0 + 2 * dstep] = s12 + four * s34
        dst[d0 + 3 * dstep] = d12 + eight * d34 + v5


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
    patch: np.ndarray,  # (t*t,) scratch
    rows: np.ndarray,  # (t*t,) scratch
    v: np.ndarray,  # (T, C, >= count): transformed tiles p0 .. p0+count-1, written
) -> None:
    """B^T d B for ``count`` consecutive tiles of every channel; zeros stand in for the padding."""
    t = m + 2
    channels, height, width = x.shape[1], x.shape[2], x.shape[3]
    for c in range(channels):
        for q in range(count):
            p = p0 + q
            n = p // tiles_per_image
            r = p - n * tiles_per_image
            y0 = (r // tiles_w) * m - pad_top
            x0 = (r % tiles_w) * m - pad_left
            plane = x[n, c]
            if y0 >= 0 and x0 >= 0 and y0 + t <= height and x0 + t <= width:
                for i in range(t):
                    for j in range(t):
                        patch[i * t + j] = plane[y0 + i, x0 + j]
            else:
                for i in range(t):
                    yy = y0 + i
                    for j in range(t):
                        xx = x0 + j
                        inside = 0 <= yy < height and 0 <= xx < width
                        patch[i * t + j] = plane[yy, xx] if inside else np.float32(0.0)
            for j in range(t):  # columns: rows = B^T d
                input_1d(m, patch, j, t, rows, j, t)
            for i in range(t):  # rows: (B^T d) B, written to transform point (i, k)
                input_1d(m, rows, i * t, 1, patch, i * t, 1)
            for k in range(t * t):
                v[k, c, q] = patch[k]


@numba.njit(cache=True)
def output_tiles(
    products: np.ndarray,  # (T, >= oc1 - oc0, >= count): the GEMMs' results for tiles p0 ..
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
    gathered: np.ndarray,  # (t*t,) scratch
    rows: np.ndarray,  # (m*t,) scratch
    out: np.ndarray,  # (N, M, OH, OW), written
) -> None:
    """A^T M A, then bias and activation, for ``count`` tiles of output channels oc0 .. oc1-1;
    the last row and column of tiles are clipped to the output."""
    t = m + 2
    out_h, out_w = out.shape[2], out.shape[3]
    result = np.empty(m * m, dtype=np.float32)
    for oc in range(oc0, oc1):
        b = bias[oc] if has_bias else np.float32(0.0)
        for q in range(count):
            for k in range(t * t):
                gathered[k] = products[k, oc - oc0, q]
            for j in range(t):  # columns: rows = A^T M (m x t)
                output_1d(m, gathered, j, t, rows, j, t)
            for i in range(m):  # rows: (A^T M) A (m x m)
                output_1d(m, rows, i * t, 1, result, i * m, 1)
            p = p0 + q
            n = p // tiles_per_image
            r = p - n * tiles_per_image
            y0 = (r // tiles_w) * m
            x0 = (r % tiles_w) * m
            plane = out[n, oc]
            for i in range(min(m, out_h - y0)):
                for j in range(min(m, out_w - x0)):
                    plane[y0 + i, x0 + j] = activate(result[i * m + j] + b, kind, alpha, low, high)


@numba.njit(parallel=True, cache=True)
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
    v_buffers: np.ndarray,  # (workers, T, C, tile_step) scratch
    m_buffers: np.ndarray,  # (workers, T, oc_step, tile_step) scratch
    out: np.ndarray,  # (N, M, OH, OW), written
) -> None:
    """Tasks (a chunk of tiles across images x a block of output channels) spread over numba's
    threads: the chunk's input transform (once per chunk and thread), one single-threaded BLAS GEMM
    per transform point, the output transform with the epilogue. Output channels are split only
    when there are fewer chunks than threads (small maps), where it also halves the transformed
    filters each thread streams through."""
    t = m + 2
    transform_points = t * t
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
        patch = np.empty(transform_points, dtype=np.float32)
        rows = np.empty(transform_points, dtype=np.float32)
        transformed = -1
        for task in range(worker, chunks * blocks, workers):
            chunk = task // blocks
            oc0 = (task % blocks) * oc_step
            oc1 = min(oc0 + oc_step, out_channels)
            p0 = chunk * tile_step
            count = min(tile_step, tiles - p0)
            if chunk != transformed:
                input_tiles(x, m, pad_top, pad_left, tiles_w, tiles_per_image, p0, count, patch, rows, v)
                transformed = chunk
            for k in range(transform_points):
                gemm_into(u[k, oc0:oc1], v[k, :, :count], False, products[k, : oc1 - oc0, :count])
            output_tiles(
                products,
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
                patch,
                rows,
                out,
            )
