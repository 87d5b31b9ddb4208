"""GEMM whose left operand (a layer's weights) is packed once, when the plan is built, for the
micro-kernel (microkernel.py); the right operand (im2col columns, or the input itself for a 1x1
layer) is read where it lies.

Why: BLAS packs both operands again on every call. A convolution's weights are the same on every
run, and on small maps (ResNet's 7x7 layers: 49 output pixels per weight) re-packing them costs
about as much as the multiplications; a tile's columns are already in cache. Blocking: KC steps of
depth and MC rows of weights at a time (MC x KC floats stay in L2), the micro-kernel's 16-column
panel of the right operand (KC x 16 floats) in L1 across the MC / ROWS calls that reuse it.
"""

from __future__ import annotations

import numba
import numpy as np

from edgecnn.kernels.cpu.gemm.microkernel import COLUMNS, ROWS, micro_kernel

DEPTH_BLOCK = 256
"""KC: depth steps per pass (one 16-column panel of the right operand: 16 KiB, half of L1)."""

ROW_BLOCK = 16 * ROWS
"""MC: weight rows per pass (96 x 256 floats: 96 KiB of packed weights, within L2)."""

COLUMN_BLOCK = 16 * COLUMNS
"""NC: columns of the right operand packed per pass (256 x 256 floats: 256 KiB, within L2)."""

SCRATCH = DEPTH_BLOCK * COLUMN_BLOCK
"""Floats of scratch packed_gemm needs: the packed panels of one pass."""


def pack_weights(weights: np.ndarray) -> np.ndarray:
    """(M, K) -> flat float32, one DEPTH_BLOCK of depth after another; within a depth block of
    ``steps``, ceil(M / ROWS) row blocks of (steps x ROWS), each row block stored depth-major. The
    last row block is padded with zero rows (their products are computed and never stored).

    Why this order: a pass over one depth block reads its row blocks in turn, so the weights stream
    from memory as one sequence (a per-row-block layout put ResNet's 512 x 4608 weights' blocks of one
    pass 110 KiB apart, each a separate DRAM stream)."""
    rows, depth = weights.shape
    blocks = -(-rows // ROWS)
    padded = np.zeros((blocks * ROWS, depth), dtype=np.float32)
    padded[:rows] = weights
    parts = [
        padded[:, k0 : k0 + DEPTH_BLOCK].reshape(blocks, ROWS, -1).transpose(0, 2, 1).reshape(-1)
        for k0 in range(0, depth, DEPTH_BLOCK)
    ]
    return np.ascontiguousarray(np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32))


@numba.njit(cache=True)
def pack_panels(b: np.ndarray, b_off: int, ldb: int, steps: int, width: int, panels: np.ndarray) -> None:
    """B's (steps x width) block -> panels[p*steps*COLUMNS + k*COLUMNS + j] = B[k, p*COLUMNS + j]:
    each 16-column panel contiguous, the last one zero-padded. Row by row: one contiguous read of
    B per step (reading a panel's column of rows touched a page per step). Indices are unsigned and
    the inner trip count a constant, so each 16-float move compiles to two vector copies."""
    full = width // COLUMNS
    tail = width - full * COLUMNS
    stride = steps * COLUMNS
    zero = np.float32(0.0)
    for k in range(steps):
        source = b_off + k * ldb
        for p in range(full):
            target = p * stride + k * COLUMNS
            start = source + p * COLUMNS
            for j in range(COLUMNS):
                panels[np.uint64(target + j)] = b[np.uint64(start + j)]
        if tail:
            target = full * stride + k * COLUMNS
            start = source + full * COLUMNS
            for j in range(tail):
                panels[np.uint64(target + j)] = b[np.uint64(start + j)]
            for j in range(tail, COLUMNS):
                panels[np.uint64(target + j)] = zero


@numba.njit(cache=True)
def gather_panels(
    image: np.ndarray,  # (Cg, H, W): one group's channels of one image
    taps: np.ndarray,  # (KH*KW, OH*OW) from im2col.tap_table
    row0: int,
    row1: int,
    p0: int,
    p1: int,
    panels: np.ndarray,  # >= ceil((p1 - p0) / COLUMNS) * COLUMNS * (row1 - row0) floats, written
) -> None:
    """Rows row0..row1, columns p0..p1 of the im2col matrix straight into pack_panels' layout:
    panels[p*steps*COLUMNS + k*COLUMNS + j] = B[row0 + k, p0 + p*COLUMNS + j], the last panel
    zero-padded. One pass where gather_rows then pack_panels copied every value twice; each
    COLUMNS-wide run has a constant trip count, so it compiles to vector gathers."""
    plane = image.shape[1] * image.shape[2]
    flat = image.reshape(image.shape[0] * plane)
    count = taps.shape[0]
    steps = row1 - row0
    span = p1 - p0
    full = span // COLUMNS
    stride = np.uint64(steps * COLUMNS)
    zero = np.float32(0.0)
    for row in range(row0, row1):
        base = np.uint64((row // count) * plane)
        offsets = taps[row % count]
        target = np.uint64((row - row0) * COLUMNS)
        for p in range(full):
            first = p0 + p * COLUMNS
            at = target + np.uint64(p) * stride
            for j in range(COLUMNS):
                offset = offsets[first + j]
                panels[at + np.uint64(j)] = flat[base + np.uint64(offset)] if offset >= 0 else zero
        if full * COLUMNS < span:
            first = p0 + full * COLUMNS
            at = target + np.uint64(full) * stride
            for j in range(COLUMNS):
                if first + j < p1:
                    offset = offsets[first + j]
                    panels[at + np.uint64(j)] = flat[base + np.uint64(offset)] if offset >= 0 else zero
                else:
                    panels[at + np.uint64(j)] = zero


@numba.njit(cache=True)
def gemm_panels(
    packed: np.ndarray,  # from pack_weights
    blocks: int,  # row blocks of the packed weights: ceil(M / ROWS)
    k0: int,  # first depth step of this pass (a multiple of DEPTH_BLOCK)
    steps: int,  # depth steps in this pass
    m0: int,  # first row of C (a multiple of ROWS)
    m1: int,  # end of C's rows
    panels: np.ndarray,  # the pass's right operand from pack_panels
    width: int,  # columns of C
    c: np.ndarray,  # flat float32: C[m, j] at c[c_off + m*ldc + j]
    c_off: int,
    ldc: int,
    accumulate: bool,  # add to C (every pass after the first) or store
) -> None:
    """C[m0:m1, :width] (+)= W[m0:m1, k0:k0+steps] @ panels, ROWS x COLUMNS blocks at a time."""
    for mc0 in range(m0, m1, ROW_BLOCK):
        mc1 = min(mc0 + ROW_BLOCK, m1)
        for j0 in range(0, width, COLUMNS):
            columns = min(COLUMNS, width - j0)
            panel = j0 * steps
            for r0 in range(mc0, mc1, ROWS):
                a_at = k0 * blocks * ROWS + (r0 // ROWS) * steps * ROWS
                c_at = c_off + r0 * ldc + j0
                rows = min(ROWS, mc1 - r0)
                micro_kernel(
                    steps, packed, a_at, panels, panel, COLUMNS, c, c_at, ldc, accumulate, rows, columns
                )


@numba.njit(cache=True)
def packed_gemm(
    packed: np.ndarray,  # from pack_weights
    depth: int,  # K
    m0: int,  # first row of C (a multiple of ROWS)
    m1: int,  # end of C's rows
    b: np.ndarray,  # flat float32: B[k, j] at b[b_off + k*ldb + j]
    b_off: int,
    ldb: int,
    width: int,  # columns of C
    c: np.ndarray,  # flat float32: C[m, j] at c[c_off + m*ldc + j]
    c_off: int,
    ldc: int,
    scratch: np.ndarray,  # >= SCRATCH floats
) -> None:
    """C[m0:m1, :width] = W[m0:m1] @ B on the calling thread: blocks of COLUMN_BLOCK columns and
    DEPTH_BLOCK steps of B packed into panels, then multiplied."""
    panels = scratch
    blocks = packed.size // max(depth * ROWS, 1)
    for n0 in range(0, width, COLUMN_BLOCK):
        n1 = min(n0 + COLUMN_BLOCK, width)
        for k0 in range(0, depth, DEPTH_BLOCK):
            steps = min(DEPTH_BLOCK, depth - k0)
            pack_panels(b, b_off + k0 * ldb + n0, ldb, steps, n1 - n0, panels)
            gemm_panels(packed, blocks, k0, steps, m0, m1, panels, n1 - n0, c, c_off + n0, ldc, k0 > 0)
