"""The measured thresholds the CPU kernels' rules compare against, as one frozen record.

Kernel predicates and factories read ``active_cpu_tuning()`` while a plan is built: the runtime
selects kernels inside ``using_cpu_tuning(options.cpu_tuning or DEFAULT_CPU_TUNING)``, so a caller
(a test, say) changes a rule by passing another record, never by patching module globals. Each
default is a crossover: the size at which one kernel starts to beat the other.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True)
class CpuTuning:
    """Rule thresholds of the CPU kernels and the runtime's thread rules (one line each: what it
    bounds, and why)."""

    # thread grains (system/threads.py): waking a second thread costs more than it saves below them
    grain: int = (
        200_000  # elements a compiled loop touches (outputs x taps) below which it runs on one thread
    )
    gemm_grain: int = 1 << 20  # multiply-adds below which a GEMM-based kernel runs on one thread
    conv_gemm_grain: int = 1 << 20  # multiply-adds below which a GEMM-based conv layer runs on one thread
    memory_bound_grain: int = 1 << 19  # elements below which a cheap activation runs on one thread
    residual_grain: int = 1 << 20  # elements below which the residual add + activation pass runs serially
    eltwise_min_size: int = 4096  # elements below which numpy's reference activation beats the compiled one

    # conv/steps.py: which GEMM the dense convolutions take
    micro_kernel_over_blas: bool | None = None  # BLAS tiles' layers to the micro-kernel (None: where AVX-512)
    max_direct_depth: int = (
        400  # deepest filter (taps x channels) the direct kernel takes: im2col costs most there
    )
    min_direct_fill: float = 0.6  # least share of the COLUMNS-pixel runs a map's rows must fill for direct

    # conv/pointwise.py: the in-place 1x1 kernel
    pointwise_max_depth: int = 144  # deepest 1x1 layer it takes on any map
    narrow_depth: int = 256  # deeper layers it takes where they have at most narrow_outputs outputs
    narrow_outputs: int = 32  # ... those output channels
    deep_min_pixels: int = 56 * 56  # maps from which it takes 1x1 layers of any depth

    # conv/pixel_rows.py: the pixel-row GEMM on small maps; A must stay in L2
    max_rows: int = 256  # most output pixels (over the batch): every panel re-reads all of A
    max_in_place_rows: int = 28 * 28  # most for 1x1 stride-1 layers at batch 1, read in place
    max_a_bytes: int = 2 << 20  # largest unfolded input (L2 per core)
    rows_min_depth: int = (
        256  # fewest multiply-adds per output: shallower, the copies cost more than the GEMM saves
    )

    # conv/direct_rows.py: direct convolution with pixels as the micro-kernel's rows
    min_gain: float = 1.0  # lanes it must fill over the direct kernel's to take a layer
    shallow_channels: int = 64  # input channels below which it takes layers at least min_tap_depth deep
    min_tap_depth: int = 128  # multiply-adds per output value for shallow and paged layers
    paged_channels: int = 64  # most input channels on planes of whole pages it takes

    # conv/winograd.py: which layers get F(4x4, 3x3), F(2x2, 3x3) or none (C, M: channels in, out)
    min_channel_ratio: int = 12  # least C*M/(C+M) for any Winograd: below, the transforms cost more
    min_f43_tiles: int = 36  # fewest 4x4 tiles for F(4x4)
    min_small_f43_tiles: int = 16  # ... where its transformed filters take at most max_small_f43_bytes
    max_small_f43_bytes: int = 4 << 20  # ... those filters' bytes
    min_in_channels: int = 64  # input channels below which the GEMMs are too shallow (K = C) to pay
    shallow_in_channels: int = 32  # ... except F(4x4) from this many on maps at most shallow_max_width wide
    shallow_max_width: int = 32  # ... that width
    min_f23_ratio: int = 48  # least C*M/(C+M) for F(2x2) where F(4x4) does not apply
    min_f23_tiles: int = 36  # ... with at least this many 2x2 tiles
    wide_f23_ratio: float = (
        math.inf
    )  # least C*M/(C+M) for F(2x2) with fewer tiles (inf: none measured faster)

    # sparse/: density below which CSR kernels beat the dense ones
    spmv_crossover: float = 0.25  # Gemm with one row (matrix-vector)
    spmm_crossover: float = 0.15  # Gemm with several rows
    conv_crossover: float = 0.10  # convolutions
    sparse_min_width: int = (
        128  # fewest pixels per sparse-conv task: shorter rows make its loops overhead-bound
    )

    # runtime (runtime/serial.py, runtime/batch.py): whole-model thread rules
    serial_model_macs: int = 20_000_000  # multiply-adds per run below which a run stays on one thread
    split_min_macs_per_image: int = 20_000_000  # fewest per image for a batch split across threads
    split_max_dense_weight_bytes: int = (
        16 << 20
    )  # most dense weight bytes for a split: each slice re-reads them


DEFAULT_CPU_TUNING = CpuTuning()
"""The defaults."""

_active: ContextVar[CpuTuning] = ContextVar("edgecnn_cpu_tuning", default=DEFAULT_CPU_TUNING)


def active_cpu_tuning() -> CpuTuning:
    """The record in effect (the default outside ``using_cpu_tuning``)."""
    return _active.get()


@contextmanager
def using_cpu_tuning(record: CpuTuning) -> Iterator[None]:
    """Make ``record`` the one in effect inside the block (per thread and async context)."""
    token = _active.set(record)
    try:
        yield
    finally:
        _active.reset(token)
