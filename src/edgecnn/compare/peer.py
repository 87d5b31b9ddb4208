"""The other engine of a comparison: which of edgecnn's tensors it can name, and how it runs.

Each engine is a ``Peer`` subclass in a module of its own, imported only when asked for (its
package is optional). A peer runs twice: once as configured, once in a second configuration that
changes only rounding (``noise_source`` says which) and fed the input nudged by one ulp, so that
its own floating-point noise can be measured layer by layer (metrics.py judges against it).
"""

from __future__ import annotations

import importlib
import importlib.util
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from edgecnn.errors import ConfigurationError
from edgecnn.importers import sniff_format
from edgecnn.ir.graph import Graph

PEERS: dict[str, str] = {
    "onnxruntime": "edgecnn.compare.onnxruntime_peer:OnnxRuntimePeer",
    "opencv": "edgecnn.compare.opencv_peer:OpenCVPeer",
    "tflite": "edgecnn.compare.tflite_peer:TFLitePeer",
    "reference": "edgecnn.compare.reference_peer:ReferencePeer",
}
"""--against name -> the class that runs that engine (module:class, imported on demand)."""


@dataclass(frozen=True)
class Probe:
    """One value both engines can name: edgecnn's tensor, the peer's name and layer type for it."""

    tensor: str
    key: str
    peer_op: str


class Peer(ABC):
    """An engine that runs the model file (or its original) and returns named intermediate values."""

    name: ClassVar[str]
    package: ClassVar[str]  # imported by the subclass; checked before it is
    extra: ClassVar[str] = "compare"  # the pip extra that installs ``package``
    formats: ClassVar[tuple[str, ...]]  # the formats (importers.sniff_format) it reads
    noise_source: ClassVar[str]  # its second configuration, for the report

    def __init__(self, model: Path, weights: Path | None, threads: int) -> None:
        self.model = model
        self.weights = weights
        self.threads = threads

    @abstractmethod
    def probes(self, graph: Graph) -> list[Probe]:
        """Every value the peer can return, named as in ``graph`` (edgecnn's graph as imported)."""

    @abstractmethod
    def run(self, feeds: Mapping[str, np.ndarray], keys: Sequence[str], alternate: bool) -> list[np.ndarray]:
        """The values of ``keys`` (Probe.key) for edgecnn's ``feeds``; ``alternate`` selects the
        second configuration."""


def open_peer(against: str, model: Path, weights: Path | None, threads: int) -> Peer:
    """The peer named ``against`` on ``model``; ConfigurationError when the name is unknown, its
    package is missing or it does not read the model's format."""
    if against not in PEERS:
        raise ConfigurationError(f"unknown engine {against!r} for --against (one of: {', '.join(PEERS)})")
    module_name, class_name = PEERS[against].split(":")
    cls: type[Peer] = getattr(importlib.import_module(module_name), class_name)
    if importlib.util.find_spec(cls.package) is None:
        raise ConfigurationError(
            f"comparing against {against} needs the '{cls.package}' package, which is not installed: "
            f"pip install 'edgecnn[{cls.extra}]'"
        )
    found = sniff_format(model)
    if found not in cls.formats:
        raise ConfigurationError(
            f"{against} reads {', '.join(cls.formats)} models; {model} is {found} "
            f"(give the file the model came from with --peer-model)"
        )
    return cls(model, weights, threads)


def nudged(feeds: Mapping[str, np.ndarray], seed: int = 0) -> dict[str, np.ndarray]:
    """The feeds with every floating-point element moved one ulp up or down at random."""
    rng = np.random.default_rng(seed)
    moved = {}
    for name, value in feeds.items():
        if np.issubdtype(value.dtype, np.floating):
            direction = np.where(rng.random(value.shape) < 0.5, -np.inf, np.inf).astype(value.dtype)
            moved[name] = np.nextafter(value, direction)
        else:
            moved[name] = value
    return moved
