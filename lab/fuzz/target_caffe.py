"""Caffe: a prototxt and its caffemodel. The net is mutated as a NetParameter (a field of any layer
parameter, a layer deleted, duplicated or retyped, input shapes), as text (lines moved, deep
nesting inserted), and the caffemodel's blobs in their shapes and data."""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import mutate
from google.protobuf import text_format

from edgecnn.importers.caffe import write_random_caffemodel
from edgecnn.importers.caffe.schema import NetParameter

Case = dict[str, bytes]
NAME = "caffe"
REPO = Path(__file__).resolve().parents[2]
PROTOTXTS = [
    REPO / "tests/fixtures/caffe/lenet.deploy.prototxt",
    *sorted((REPO / "tests/importers/caffe/nets").glob("*.prototxt")),
]
LAYER_TYPES = (
    "Convolution", "Deconvolution", "InnerProduct", "Pooling", "ReLU", "PReLU", "Sigmoid", "TanH", "ELU",
    "Power", "LRN", "Softmax", "Dropout", "Split", "Concat", "Slice", "Eltwise", "BatchNorm", "Scale",
    "Flatten", "Reshape", "Input", "AbsVal", "Crop",
)  # fmt: skip
TEXT_FRAGMENTS = (
    "layer {", "}", "input_dim: 1000000", 'layer { name: "x" type: "ReLU" bottom: "data" top: "data" }',
    "unknown_field { " * 300 + "}" * 300, 'input: "data"', "input_shape { dim: 1 dim: 2147483647 }",
)  # fmt: skip


def seeds() -> list[Case]:
    cases = []
    with tempfile.TemporaryDirectory() as folder:
        for prototxt in PROTOTXTS:
            weights = Path(folder) / "weights.caffemodel"
            write_random_caffemodel(prototxt, weights, seed=1)
            cases.append(
                {"model.prototxt": prototxt.read_bytes(), "weights.caffemodel": weights.read_bytes()}
            )
    return cases


def _net(data: bytes, binary: bool) -> NetParameter | None:
    net = NetParameter()
    try:
        if binary:
            net.ParseFromString(data)
        else:
            text_format.Parse(data.decode("utf-8"), net)
    except Exception:  # an earlier mutation broke it: fall back to blind edits
        return None
    return net


def _names(net: NetParameter) -> list[str]:
    names = [*net.input]
    for layer in [*net.layer, *net.layers]:
        names.extend([layer.name, *layer.bottom, *layer.top])
    return names


def _edit_net(net: NetParameter, rng: random.Random) -> None:
    action = rng.random()
    layers = net.layer
    if action < 0.5 or not layers:
        mutate.mutate_message(net, rng, _names(net))
    elif action < 0.7:
        mutate.mutate_repeated_message(net, rng)
    elif action < 0.85:
        layers[rng.randrange(len(layers))].type = rng.choice(LAYER_TYPES)
    else:
        shape = net.input_shape[0] if net.input_shape else None
        if shape is not None and shape.dim:
            shape.dim[rng.randrange(len(shape.dim))] = mutate.clamp(mutate.interesting_int(rng), 64, True)


def _edit_blobs(net: NetParameter, rng: random.Random) -> None:
    blobs = [blob for layer in [*net.layer, *net.layers] for blob in layer.blobs]
    if not blobs:
        return
    blob = rng.choice(blobs)
    action = rng.randrange(3)
    if action == 0 and blob.shape.dim:
        blob.shape.dim[rng.randrange(len(blob.shape.dim))] = mutate.clamp(
            mutate.interesting_int(rng), 64, True
        )
    elif action == 1 and len(blob.data):
        del blob.data[rng.randrange(len(blob.data)) :]
    else:
        mutate.mutate_message(blob, rng)


def mutate_case(case: Case, rng: random.Random) -> Case:
    prototxt, weights = case["model.prototxt"], case["weights.caffemodel"]
    for _ in range(rng.choice((1, 1, 2))):
        action = rng.random()
        if action < 0.5:
            net = _net(prototxt, binary=False)
            if net is None:
                prototxt = mutate.mutate_bytes(prototxt, rng)
            else:
                _edit_net(net, rng)
                prototxt = text_format.MessageToString(net).encode()
        elif action < 0.65:
            text = prototxt.decode("utf-8", "replace")
            prototxt = mutate.mutate_lines(text, rng, TEXT_FRAGMENTS).encode()
        elif action < 0.9:
            model = _net(weights, binary=True)
            if model is None:
                weights = mutate.mutate_bytes(weights, rng)
            else:
                _edit_blobs(model, rng)
                weights = model.SerializeToString()
        else:
            weights = mutate.mutate_bytes(weights, rng)
    return {"model.prototxt": prototxt, "weights.caffemodel": weights}
