"""scikit-learn's handwritten digits (1,797 8x8 images, 0..16), upsampled to 28x28 like MNIST."""

from __future__ import annotations

import numpy as np
from PIL import Image

from edgecnn.errors import InputError
from edgecnn.train.data.dataset import Dataset


def upsample(images: np.ndarray, size: int) -> np.ndarray:
    """Bilinear resize of (N, h, w) float images to (N, size, size)."""
    return np.stack(
        [
            np.asarray(
                Image.fromarray(image.astype(np.float32), mode="F").resize(
                    (size, size), Image.Resampling.BILINEAR
                )
            )
            for image in images
        ]
    ).astype(np.float32)


def load_digits(size: int = 28) -> Dataset:
    """The digits set as (N, 1, size, size) float32 in 0..1 (needs scikit-learn: pip install 'edgecnn[train]')."""
    try:
        from sklearn.datasets import load_digits as sklearn_digits
    except ImportError:
        raise InputError(
            "the digits dataset ships with scikit-learn, which is not installed (pip install 'edgecnn[train]')"
        ) from None
    bunch = sklearn_digits()
    images = np.asarray(bunch.images, np.float32) / 16.0
    images = np.clip(upsample(images, size), 0.0, 1.0)
    return Dataset(
        images[:, None], np.asarray(bunch.target, np.int64), tuple(str(d) for d in range(10)), "digits"
    )
