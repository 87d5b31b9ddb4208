"""onnxruntime as the other engine: every node output of the ONNX file made a graph output.

Outputs are added by name alone (no type or shape): onnxruntime infers them, so models whose
value_info is missing or partial still expose every tensor. Its noise is its own graph optimisation
(ORT_ENABLE_ALL, which rewrites convolutions into its blocked layout) against none
(ORT_DISABLE_ALL)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from edgecnn.compare.peer import Peer, Probe
from edgecnn.errors import GraphError, ModelFormatError
from edgecnn.ir.graph import Graph


class OnnxRuntimePeer(Peer):
    name = "onnxruntime"
    package = "onnxruntime"
    formats = ("onnx",)
    noise_source = "onnxruntime with all graph optimisations (ORT_ENABLE_ALL) against none (ORT_DISABLE_ALL)"

    def probes(self, graph: Graph) -> list[Probe]:
        return [
            Probe(name, name, node.op_type)
            for node in self._proto().graph.node
            for name in node.output
            if name
        ]

    def run(self, feeds: Mapping[str, np.ndarray], keys: Sequence[str], alternate: bool) -> list[np.ndarray]:
        session = self._session(keys, alternate)
        names = [i.name for i in session.get_inputs() if i.name in feeds]  # it names any missing one
        try:
            values = session.run(list(keys), {n: feeds[n] for n in names})
        except Exception as exc:  # onnxruntime raises its own exception types
            raise GraphError(f"onnxruntime failed to run {self.model}: {exc}") from None
        return [np.asarray(v) for v in values]

    def _proto(self) -> Any:
        import onnx

        try:
            return onnx.load(str(self.model))
        except Exception as exc:  # protobuf's DecodeError and onnx's own
            raise ModelFormatError(f"{self.model}: onnx cannot read it: {exc}") from None

    def _session(self, keys: Sequence[str], alternate: bool) -> Any:
        """A session on the model with ``keys`` added to its outputs."""
        import onnx
        import onnxruntime as ort

        proto = self._proto()
        declared = {o.name for o in proto.graph.output}
        proto.graph.output.extend(onnx.ValueInfoProto(name=k) for k in keys if k not in declared)
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        level = ort.GraphOptimizationLevel
        options.graph_optimization_level = level.ORT_ENABLE_ALL if alternate else level.ORT_DISABLE_ALL
        options.log_severity_level = 3  # errors only: not its notes on unused initializers
        try:
            return ort.InferenceSession(
                proto.SerializeToString(), options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime's Fail / InvalidGraph / NotImplemented
            raise ModelFormatError(f"{self.model}: onnxruntime cannot load it: {exc}") from None
