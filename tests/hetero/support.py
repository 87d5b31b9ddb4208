"""Helpers for the hetero tests: an example input for a model, and whether an OpenCL device can run here."""

from __future__ import annotations

import numpy as np

import edgecnn


def example_input(model: edgecnn.Model, seed: int = 0) -> np.ndarray:
    spec = model.inputs[0]
    shape = tuple(d if isinstance(d, int) else 1 for d in spec.shape)  # type: ignore[union-attr]
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def has_opencl() -> bool:
    """Whether opencl:0 is here and builds kernels (kernels.gpu.backends.support.opencl_unusable)."""
    from kernels.gpu.backends.support import opencl_unusable

    return opencl_unusable() is None
