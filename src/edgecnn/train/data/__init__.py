"""Training data: scikit-learn's digits, MNIST IDX files, image folders and .npz arrays, as ``Dataset``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from edgecnn.errors import InputError
from edgecnn.train.data.arrays import load_arrays
from edgecnn.train.data.dataset import Dataset
from edgecnn.train.data.digits import load_digits
from edgecnn.train.data.folder import load_image_folder
from edgecnn.train.data.idx import load_mnist, parse_idx, read_idx

if TYPE_CHECKING:
    from edgecnn.ir.graph import Graph

__all__ = [
    "Dataset",
    "check_sample_shape",
    "load_arrays",
    "load_dataset",
    "load_dataset_for",
    "load_digits",
    "load_image_folder",
    "load_mnist",
    "model_input_size",
    "model_sample_shape",
    "parse_idx",
    "read_idx",
]


def load_dataset(
    spec: str, size: tuple[int, int] = (28, 28), channels: int = 1, test_fraction: float = 0.2, seed: int = 0
) -> tuple[Dataset, Dataset]:
    """(train, test) from ``digits``, ``idx:DIR`` (MNIST files; its own test split), ``folder:DIR``
    or ``npz:FILE`` (arrays as saved, any input shape; ``size`` and ``channels`` do not apply).

    digits, folders and arrays hold out ``test_fraction`` of every class, chosen by ``seed``."""
    kind, _, where = spec.partition(":")
    if kind == "digits" and not where:
        if size[0] != size[1]:
            raise InputError(f"digits are square; got size {size}")
        return load_digits(size[0]).split(test_fraction, seed)
    if kind == "idx" and where:
        return load_mnist(Path(where))
    if kind == "folder" and where:
        return load_image_folder(Path(where), size, channels).split(test_fraction, seed)
    if kind == "npz" and where:
        return load_arrays(Path(where)).split(test_fraction, seed)
    raise InputError(
        f"dataset {spec!r}: use digits, idx:DIR (MNIST IDX files), folder:DIR (a subfolder per class) "
        "or npz:FILE (arrays 'inputs' and 'labels')"
    )


def model_sample_shape(graph: Graph) -> tuple[int | str | None, ...]:
    """The per-sample dims of the model's input (batch axis dropped): (C, H, W), (C, L), ..."""
    spec = next(s for s in graph.inputs if s.name not in graph.initializers)
    return tuple(spec.shape or ())[1:]


def check_sample_shape(graph: Graph, data: Dataset) -> None:
    """Refuse a set whose samples do not fit the model's input (dims the model leaves open fit any size)."""
    want = model_sample_shape(graph)
    got = data.images.shape[1:]
    if len(want) != len(got) or any(isinstance(w, int) and w != g for w, g in zip(want, got)):
        shown = "x".join(str(d) if isinstance(d, int) else "?" for d in want)
        raise InputError(f"{data.name}: its samples are {'x'.join(map(str, got))}, the model takes {shown}")


def model_input_size(graph: Graph) -> tuple[int, int, int]:
    """(channels, height, width) the model's input expects; 1x28x28 where the file leaves them open."""
    spec = next(s for s in graph.inputs if s.name not in graph.initializers)
    dims = list(spec.shape or ())[1:]
    if len(dims) != 3:
        raise InputError(f"the model's input {spec} is not (N, C, H, W)")
    channels, height, width = (d if isinstance(d, int) else default for d, default in zip(dims, (1, 28, 28)))
    return channels, height, width


def load_dataset_for(
    graph: Graph, spec: str, test_fraction: float = 0.2, seed: int = 0
) -> tuple[Dataset, Dataset]:
    """(train, test) of ``spec`` at ``graph``'s input size, split as ``load_dataset`` splits it for the
    same seed and fraction (so a model trained on one split is not scored on its training images)."""
    channels, height, width = model_input_size(graph)
    train, test = load_dataset(spec, (height, width), channels, test_fraction, seed)
    if train.images.shape[1:] != (channels, height, width):
        raise InputError(
            f"dataset {spec}: its images are {'x'.join(map(str, train.images.shape[1:]))}, "
            f"the model's input takes {channels}x{height}x{width}"
        )
    return train, test
