"""What the batch tests share: the bundled face classifier, its task, and crops of its samples."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from edgecnn.batch import TaskSpec
from edgecnn.vision.faces import BUNDLED_MODEL, bundled_path
from edgecnn.vision.preprocess import Preprocess

FACE_MODEL = bundled_path(BUNDLED_MODEL)
FACE_TASK = TaskSpec(
    "classify",
    Preprocess(size=(128, 128), channel_order="bgr", scale=1 / 255),
    top=2,
    apply_softmax=True,
    labels=("background", "face"),
)


def write_crops(folder: Path, count: int, seed: int = 0) -> list[Path]:
    """``count`` random crops of the two bundled samples as JPEG and PNG files in ``folder``."""
    rng = np.random.default_rng(seed)
    samples = [Image.open(bundled_path(f"simplecnn/samples/{n}.jpg")).convert("RGB") for n in ("face", "bg")]
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        image = samples[i % 2]
        w, h = image.size
        side = int(rng.integers(min(w, h) // 2, min(w, h) + 1))
        x0, y0 = int(rng.integers(0, w - side + 1)), int(rng.integers(0, h - side + 1))
        path = folder / f"img{i:04d}.{'png' if i % 3 == 0 else 'jpg'}"
        image.crop((x0, y0, x0 + side, y0 + side)).save(path)
        paths.append(path)
    return paths
