"""Damaged ONNX files: truncations and byte flips only ever raise edgecnn's own errors.

ONNX has no checksums, so a flipped byte can also yield a well-formed but different graph:
then loading or running may succeed, or fail with GraphError/InputError — never a crash.
"""

from pathlib import Path

import numpy as np
import onnx
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import edgecnn
from edgecnn.errors import EdgeCNNError


def small_model_bytes() -> bytes:
    weights = numpy_helper.from_array(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4), "slope")
    nodes = [
        helper.make_node("Relu", ["x"], ["h"], name="relu"),
        helper.make_node("LeakyRelu", ["h"], ["y"], name="leaky", alpha=0.1),
    ]
    graph = helper.make_graph(
        nodes,
        "fuzz",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
        [weights],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    return model.SerializeToString()


VALID = small_model_bytes()


def load_and_run(path: Path) -> None:
    try:
        model = edgecnn.load(path)
        feeds = {
            s.name: np.ones([d if isinstance(d, int) else 2 for d in (s.shape or ())], s.dtype)
            for s in model.inputs
        }
        model.run(feeds)
    except EdgeCNNError:
        pass


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(0, len(VALID) - 1))
def test_truncated(tmp_path: Path, cut: int) -> None:
    path = tmp_path / "cut.onnx"
    path.write_bytes(VALID[:cut])
    load_and_run(path)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flips=st.lists(st.tuples(st.integers(0, len(VALID) - 1), st.integers(1, 255)), min_size=1, max_size=4))
@example(flips=[(89, 64)])  # a dimension of 2**62 or so: its product wrapped around in int64
def test_byte_flips(tmp_path: Path, flips: list[tuple[int, int]]) -> None:
    data = bytearray(VALID)
    for offset, mask in flips:
        data[offset] ^= mask
    path = tmp_path / "flip.onnx"
    path.write_bytes(bytes(data))
    load_and_run(path)


def test_valid_model_loads() -> None:
    assert onnx.load_model_from_string(VALID).graph.name == "fuzz"
