"""TensorFlow Lite (the LiteRT interpreter) as the other engine, every tensor preserved.

edgecnn's TFLite importer keeps each tensor's TFLite name for its stored form (int8 where the file
quantises it) in the layout it computes it in; the graph's metadata lists the tensors held as NCHW,
and LiteRT's NHWC values of those are transposed before they are compared. Tensor names that occur
more than once in the file are not compared. LiteRT runs its builtin kernels without default delegates
(XNNPACK would keep intermediate tensors to itself); its noise is its reference kernels
(BUILTIN_REF), fed the input nudged by one ulp."""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from edgecnn.compare.peer import Peer, Probe
from edgecnn.errors import GraphError, ModelFormatError
from edgecnn.importers.tflite.reader import read_tflite
from edgecnn.ir.graph import Graph

NCHW_METADATA = "tflite_nchw_tensors"
TO_NCHW = (0, 3, 1, 2)


class TFLitePeer(Peer):
    name = "tflite"
    package = "ai_edge_litert"
    formats = ("tflite",)
    noise_source = (
        "LiteRT's reference kernels (BUILTIN_REF) against its builtin ones, fed the input nudged by one ulp"
    )

    def __init__(self, model: Path, weights: Path | None, threads: int) -> None:
        super().__init__(model, weights, threads)
        self._interpreters = {alternate: self._interpreter(alternate) for alternate in (False, True)}
        self._nchw: frozenset[str] = frozenset()

    def _interpreter(self, alternate: bool) -> Any:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType

        resolver = (
            OpResolverType.BUILTIN_REF if alternate else OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
        )
        try:
            with warnings.catch_warnings():  # its note that preserving tensors is for debugging: we are
                warnings.filterwarnings("ignore", ".*experimental_preserve_all_tensors", UserWarning)
                interpreter = Interpreter(
                    model_path=str(self.model),
                    num_threads=self.threads,
                    experimental_op_resolver_type=resolver,
                    experimental_preserve_all_tensors=True,
                )
            interpreter.allocate_tensors()
        except (RuntimeError, ValueError) as exc:
            raise ModelFormatError(f"{self.model}: LiteRT cannot load it: {exc}") from None
        return interpreter

    def probes(self, graph: Graph) -> list[Probe]:
        self._nchw = frozenset(filter(None, graph.metadata.get(NCHW_METADATA, "").split(",")))
        model = read_tflite(self.model)
        counts = Counter(t.name for t in model.tensors)
        probes = []
        for op in model.operators:
            for index in op.outputs:
                if index >= 0 and counts[model.tensors[index].name] == 1:
                    probes.append(Probe(model.tensors[index].name, str(index), op.opcode))
        return probes

    def run(self, feeds: Mapping[str, np.ndarray], keys: Sequence[str], alternate: bool) -> list[np.ndarray]:
        interpreter = self._interpreters[alternate]
        try:
            for detail in interpreter.get_input_details():
                if detail["name"] not in feeds:
                    raise GraphError(
                        f"LiteRT wants input {detail['name']!r}, which edgecnn's model does not have"
                    )
                interpreter.set_tensor(detail["index"], feeds[detail["name"]])
            interpreter.invoke()
            names = {d["index"]: d["name"] for d in interpreter.get_tensor_details()}
            values = []
            for key in keys:
                value = np.array(interpreter.get_tensor(int(key)))
                values.append(value.transpose(TO_NCHW) if names[int(key)] in self._nchw else value)
        except (RuntimeError, ValueError) as exc:
            raise GraphError(f"LiteRT failed to run {self.model}: {exc}") from None
        return values
