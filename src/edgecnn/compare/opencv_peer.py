"""OpenCV's dnn module as the other engine, on the ONNX, Caffe or Darknet files it reads.

Layer fusion is switched off so that every layer's own output can be fetched with
``forward(layerNames)``. How its layer names map to edgecnn's tensors depends on the format:

- ONNX: a named node is layer ``onnx_node!<name>``, an unnamed one ``onnx_node_output_0!<output>``;
  the layer's value is the node's first output.
- Caffe: layers keep their names, and so do edgecnn's nodes (in-place layers included).
- Darknet: OpenCV names the layers of cfg section ``i`` ``<kind>_<i>`` but numbers an activation
  after the section it ends (``conv_0, bn_0, leaky_1, pool_1``); edgecnn names its nodes
  ``layer<i>.<kind>.<part>``. Sections are matched by index (activations joined to the section
  before them); inside a section whose layers line up one to one every layer is compared,
  otherwise only the section's output.

Its noise: the same net with Winograd convolution off, fed the input nudged by one ulp.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from edgecnn.compare.peer import Peer, Probe
from edgecnn.errors import GraphError, ModelFormatError
from edgecnn.importers import sniff_format
from edgecnn.ir.graph import Graph

ACTIVATION_TYPES = frozenset(
    {"ReLU", "ReLU6", "Sigmoid", "TanH", "Swish", "Mish", "ELU", "Power", "AbsVal", "BNLL", "HardSwish"}
)
"""OpenCV layer types that Darknet's importer adds as a section's activation."""

_DARKNET_NAME = re.compile(r"^(.*)_(\d+)$")
_EDGECNN_DARKNET_NAME = re.compile(r"^layer(\d+)\.")


class OpenCVPeer(Peer):
    name = "opencv"
    package = "cv2"
    formats = ("onnx", "caffe", "darknet")
    noise_source = "OpenCV with Winograd convolution off, fed the input nudged by one ulp"

    def __init__(self, model: Path, weights: Path | None, threads: int) -> None:
        super().__init__(model, weights, threads)
        self.format = sniff_format(model)
        if self.format in ("caffe", "darknet") and weights is None:
            raise ModelFormatError(f"{model}: OpenCV needs the weights file of a {self.format} model")
        self._nets = {alternate: self._read(alternate) for alternate in (False, True)}
        self._names: list[str] = list(self._nets[False].getLayerNames())

    def _read(self, alternate: bool) -> Any:
        import cv2

        cv2.setNumThreads(self.threads)
        try:
            if self.format == "onnx":
                net = cv2.dnn.readNetFromONNX(str(self.model))
            elif self.format == "caffe":
                net = cv2.dnn.readNetFromCaffe(str(self.model), str(self.weights))
            else:
                net = cv2.dnn.readNetFromDarknet(str(self.model), str(self.weights))
        except cv2.error as exc:
            raise ModelFormatError(f"{self.model}: OpenCV cannot read it: {exc}") from None
        net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
        net.setPreferableTarget(cv2.dnn.DNN_TARGET_CPU)
        net.enableFusion(False)
        if alternate:
            net.enableWinograd(False)
        return net

    def _type(self, name: str) -> str:
        return str(self._nets[False].getLayer(name).type)

    def probes(self, graph: Graph) -> list[Probe]:
        if self.format == "onnx":
            return self._onnx_probes()
        if self.format == "caffe":
            outputs = {node.name: node.outputs[0] for node in graph.nodes}
            return [Probe(outputs[n], n, self._type(n)) for n in self._names if n in outputs]
        return self._darknet_probes(graph)

    def _onnx_probes(self) -> list[Probe]:
        import onnx

        known = set(self._names)
        probes = []
        for node in onnx.load(str(self.model), load_external_data=False).graph.node:
            if not node.output or not node.output[0]:
                continue
            key = f"onnx_node!{node.name}" if node.name else f"onnx_node_output_0!{node.output[0]}"
            if key in known:
                probes.append(Probe(node.output[0], key, self._type(key)))
        return probes

    def _darknet_probes(self, graph: Graph) -> list[Probe]:
        ours: dict[int, list[str]] = defaultdict(list)
        for node in graph.nodes:
            match = _EDGECNN_DARKNET_NAME.match(node.name)
            if match:
                ours[int(match.group(1))].append(node.outputs[0])
        theirs: dict[int, list[str]] = defaultdict(list)
        section = -1
        for name in self._names:
            match = _DARKNET_NAME.match(name)
            if match is None:
                continue
            if self._type(name) not in ACTIVATION_TYPES or section < 0:
                section = int(match.group(2))
            theirs[section].append(name)
        probes: list[Probe] = []
        for index, keys in theirs.items():
            tensors = ours.get(index)
            if not tensors:
                continue  # a detection layer: edgecnn decodes it outside the graph
            pairs = zip(tensors, keys) if len(tensors) == len(keys) else [(tensors[-1], keys[-1])]
            probes.extend(Probe(tensor, key, self._type(key)) for tensor, key in pairs)
        return probes

    def run(self, feeds: Mapping[str, np.ndarray], keys: Sequence[str], alternate: bool) -> list[np.ndarray]:
        import cv2

        net = self._nets[alternate]
        try:
            if len(feeds) == 1:
                net.setInput(next(iter(feeds.values())))
            else:
                for name, value in feeds.items():
                    net.setInput(value, name)
            values = net.forward(list(keys))
        except cv2.error as exc:
            raise GraphError(f"OpenCV failed to run {self.model}: {exc}") from None
        return [np.array(v) for v in values]
