"""A labelled set saved by numpy: ``inputs`` (N, C, H, W) images or (N, C, L) signals, ``labels`` (N,)
and, optionally, ``classes`` (their names), for data that is not a folder of images (radar returns,
sensor windows, pre-processed tensors)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from edgecnn.errors import InputError
from edgecnn.train.data.dataset import Dataset

INPUTS, LABELS, CLASSES = "inputs", "labels", "classes"


def load_arrays(path: Path) -> Dataset:
    """The set in ``path`` (an .npz written by ``numpy.savez``); class names default to 0..K-1."""
    try:
        with np.load(path, allow_pickle=False) as archive:
            missing = [key for key in (INPUTS, LABELS) if key not in archive.files]
            if missing:
                raise InputError(
                    f"{path}: needs arrays {INPUTS!r} and {LABELS!r}, missing {', '.join(missing)}"
                )
            inputs = archive[INPUTS]
            labels = archive[LABELS]
            names = archive[CLASSES] if CLASSES in archive.files else None
    except FileNotFoundError:
        raise InputError(f"dataset file not found: {path}") from None
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise InputError(f"{path}: not an .npz of plain arrays ({exc})") from None
    if inputs.dtype.kind not in "fiu" or labels.dtype.kind not in "iu":
        raise InputError(f"{path}: {INPUTS} must be numbers and {LABELS} integers")
    count = int(labels.max()) + 1 if labels.size else 0
    classes = tuple(str(n) for n in names) if names is not None else tuple(str(k) for k in range(count))
    return Dataset(inputs.astype(np.float32), labels.astype(np.int64), classes, path.name)
