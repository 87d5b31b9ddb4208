"""An ``onnx.backend.base.Backend`` adapter, so ONNX's own conformance suite can run edgecnn."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep

from edgecnn.importers.onnx.reader import graph_from_model_proto
from edgecnn.model import Model
from edgecnn.runtime.options import RuntimeOptions


class EdgeCNNRep(BackendRep):
    """A prepared model; ``run`` takes inputs positionally, in the graph's input order."""

    def __init__(self, model: Model) -> None:
        self.model = model

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        arrays = [inputs] if isinstance(inputs, np.ndarray) else list(inputs)
        feeds = {spec.name: np.asarray(x) for spec, x in zip(self.model.inputs, arrays)}
        result = self.model.run(feeds)
        return tuple(result[name] for name in self.model.graph.outputs)


class EdgeCNNBackend(Backend):
    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> EdgeCNNRep:
        graph = graph_from_model_proto(model, source=model.graph.name or "<ModelProto>")
        return EdgeCNNRep(Model(graph, RuntimeOptions.resolve(threads=kwargs.get("threads"))))

    @classmethod
    def run_model(
        cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU", **kwargs: Any
    ) -> tuple[Any, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device.upper() == "CPU"
