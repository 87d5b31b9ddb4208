"""Window geometry shared by convolution and pooling: padding, output sizes, sliding views."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from edgecnn.ir.graph import Dim
from edgecnn.ops.common import AutoPad, check, shown


def spatial_defaults(
    rank: int, strides: Sequence[int] | None, dilations: Sequence[int] | None, pads: Sequence[int] | None
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Strides, dilations and pads (begins then ends) with ONNX defaults filled in and checked."""
    s = tuple(strides) if strides else (1,) * rank
    d = tuple(dilations) if dilations else (1,) * rank
    p = tuple(pads) if pads else (0,) * (2 * rank)
    check(len(s) == rank, f"strides {shown(s)} do not match {rank} spatial dims")
    check(len(d) == rank, f"dilations {shown(d)} do not match {rank} spatial dims")
    check(len(p) == 2 * rank, f"pads {shown(p)} must have {2 * rank} values")
    check(all(v >= 1 for v in s), f"strides must be >= 1, got {shown(s)}")
    check(all(v >= 1 for v in d), f"dilations must be >= 1, got {shown(d)}")
    check(all(v >= 0 for v in p), f"pads must be >= 0, got {shown(p)}")
    return s, d, p


def resolve_pads(
    auto_pad: AutoPad,
    in_dims: Sequence[Dim],
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    pads: Sequence[int],
) -> tuple[int, ...] | None:
    """Explicit pads (begins..., ends...) for ``auto_pad``; None when SAME needs unknown sizes."""
    rank = len(kernel)
    if auto_pad is AutoPad.NOTSET:
        return tuple(pads)
    if auto_pad is AutoPad.VALID:
        return (0,) * (2 * rank)
    sizes = [d for d in in_dims if isinstance(d, int)]
    if len(sizes) != len(in_dims):
        return None
    begins, ends = [], []
    for size, k, s, d in zip(sizes, kernel, strides, dilations):
        out = -(-size // s)
        total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
        small, large = total // 2, total - total // 2
        begins.append(small if auto_pad is AutoPad.SAME_UPPER else large)
        ends.append(large if auto_pad is AutoPad.SAME_UPPER else small)
    return tuple(begins + ends)


def window_output_dim(
    size: Dim, kernel: int, stride: int, dilation: int, begin: int, end: int, ceil: bool
) -> Dim:
    """Number of window positions along one axis (ONNX/PyTorch rule for ceil_mode)."""
    if not isinstance(size, int):
        return None
    span = (kernel - 1) * dilation + 1
    room = size + begin + end - span
    check(room >= 0, f"window of extent {span} does not fit the padded size {size + begin + end}")
    out = (-(-room // stride) if ceil else room // stride) + 1
    if ceil and (out - 1) * stride >= size + begin:
        out -= 1  # the last window would start in the end padding
    return out


def output_dims(
    in_dims: Sequence[Dim],
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    pads: Sequence[int] | None,
    ceil: bool = False,
) -> tuple[Dim, ...]:
    rank = len(kernel)
    if pads is None:  # SAME with unknown sizes: out = ceil(in / stride)
        return tuple(-(-d // s) if isinstance(d, int) else None for d, s in zip(in_dims, strides))
    return tuple(
        window_output_dim(in_dims[i], kernel[i], strides[i], dilations[i], pads[i], pads[i + rank], ceil)
        for i in range(rank)
    )


def sliding_windows(
    padded: np.ndarray,
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    out: Sequence[int],
) -> np.ndarray:
    """Read-only view of shape (N, C, *out, *kernel) over an already padded (N, C, *spatial) array."""
    spatial_strides = padded.strides[2:]
    shape = (*padded.shape[:2], *out, *kernel)
    strides_bytes = (
        *padded.strides[:2],
        *(st * s for st, s in zip(spatial_strides, strides)),
        *(st * d for st, d in zip(spatial_strides, dilations)),
    )
    return np.lib.stride_tricks.as_strided(padded, shape, strides_bytes, writeable=False)


def pad_spatial(x: np.ndarray, begins: Sequence[int], ends: Sequence[int], value: float | int) -> np.ndarray:
    """Pad the spatial axes (2...) of an (N, C, ...) array with a constant."""
    if not any(begins) and not any(ends):
        return x
    widths = [(0, 0), (0, 0), *zip(begins, ends)]
    return np.pad(x, widths, mode="constant", constant_values=value)
