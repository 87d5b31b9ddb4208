"""save_ecnn -> load_ecnn gives the same graph, the same model outputs, and zero-copy read-only arrays."""

from __future__ import annotations

import mmap
import os
import stat
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
from ecnn_helpers import assert_graphs_equal, small_cnn

import edgecnn
from edgecnn.errors import GraphError
from edgecnn.format import FORMAT_MAJOR, SectionInfo, load_ecnn, read_header, read_sections, save_ecnn
from edgecnn.importers import load_graph
from edgecnn.importers.onnx import load_onnx
from edgecnn.ir.graph import Graph, Node, TensorSpec, TensorType
from edgecnn.model import Model
from edgecnn.ops.dense import GemmAttrs
from edgecnn.ops.registry import NoAttrs

FACE_ONNX = Path(str(resources.files("edgecnn") / "data" / "simplecnn" / "face_binary_cls.onnx"))


def mapped_from(array: np.ndarray) -> bool:
    """True when the array's memory belongs to an mmap (followed through views and memoryviews)."""
    base: object = array
    while isinstance(base, (np.ndarray, memoryview)):
        base = base.base if isinstance(base, np.ndarray) else base.obj
    return isinstance(base, mmap.mmap)


def test_small_cnn_round_trip_is_equal_and_runs_identically(tmp_path: Path, cnn_graph: Graph) -> None:
    path = tmp_path / "cnn.ecnn"
    save_ecnn(cnn_graph, path)
    loaded = load_ecnn(path, verify=True)
    assert_graphs_equal(cnn_graph, loaded)
    x = np.random.default_rng(1).standard_normal((2, 3, 8, 8)).astype(np.float32)
    expected = Model(cnn_graph)(x)
    assert np.array_equal(Model(loaded)(x), expected)
    assert np.array_equal(edgecnn.load(path)(x), expected)  # through the format dispatch


def test_onnx_model_round_trip_gives_identical_outputs(tmp_path: Path) -> None:
    graph = load_onnx(FACE_ONNX)
    path = tmp_path / "face.ecnn"
    save_ecnn(graph, path)
    loaded = load_graph(path)
    assert_graphs_equal(graph, loaded)
    model = Model(graph)
    x = np.random.default_rng(2).standard_normal(model.inputs[0].shape).astype(np.float32)
    assert np.array_equal(Model(loaded)(x), model(x))


def test_arrays_are_read_only_views_of_the_file(tmp_path: Path, cnn_graph: Graph) -> None:
    path = tmp_path / "cnn.ecnn"
    save_ecnn(cnn_graph, path)
    loaded = load_ecnn(path)
    arrays = [*loaded.initializers.values(), loaded.nodes[5].attrs.value]
    for array in arrays:
        assert mapped_from(array), "array was copied instead of mapped"
        assert not array.flags.writeable
        assert array.ctypes.data % 64 == 0, "blob is not 64-byte aligned in memory"
        with pytest.raises(ValueError):
            array.reshape(-1)[0] = 1


def test_saving_over_a_mapped_file_leaves_loaded_arrays_intact(tmp_path: Path) -> None:
    path = tmp_path / "m.ecnn"
    first = small_cnn(seed=0)
    save_ecnn(first, path)
    loaded = load_ecnn(path)
    save_ecnn(small_cnn(seed=1), path)
    assert np.array_equal(loaded.initializers["fc.w"], first.initializers["fc.w"])
    assert not np.array_equal(load_ecnn(path).initializers["fc.w"], first.initializers["fc.w"])
    assert [p.name for p in tmp_path.iterdir()] == ["m.ecnn"], "temporary file left behind"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644


def test_every_dtype_odd_shapes_and_layouts_round_trip(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    inits = {
        "f32": rng.standard_normal((3, 5)).astype(np.float32),
        "f16": rng.standard_normal(7).astype(np.float16),
        "f64": np.array([np.inf, -np.inf, np.nan, -0.0, 1e-300]),
        "i8": np.array([-128, 0, 127], np.int8),
        "u8": np.arange(13, dtype=np.uint8),
        "i16": np.array([-3, 3], np.int16),
        "u16": np.array([65535], np.uint16),
        "i32": np.array([[1, -2]], np.int32),
        "u32": np.array([2**32 - 1], np.uint32),
        "i64": np.array([-(2**63), 2**63 - 1]),
        "u64": np.array([2**64 - 1], np.uint64),
        "bool": np.array([True, False, True]),
        "scalar": np.array(2.5, np.float32),
        "empty": np.zeros((0, 4), np.float32),
        "big_endian": np.arange(6, dtype=">i4").reshape(2, 3),
        "transposed": np.arange(12, dtype=np.float32).reshape(3, 4).T,
    }
    nodes = [Node("Identity", f"id_{name}", [name], [f"out_{name}"], NoAttrs()) for name in inits]
    graph = Graph([], [f"out_{name}" for name in inits], nodes, inits, name="dtypes")
    path = tmp_path / "dtypes.ecnn"
    save_ecnn(graph, path)
    loaded = load_ecnn(path, verify=True)
    for name, array in inits.items():
        got = loaded.initializers[name]
        assert got.dtype == array.dtype.newbyteorder("=") and got.shape == array.shape, name
        assert np.array_equal(got, array, equal_nan=array.dtype.kind == "f"), name
        assert got.size == 0 or got.ctypes.data % 64 == 0


def test_specs_symbolic_dims_output_types_and_metadata_round_trip(tmp_path: Path) -> None:
    graph = Graph(
        [TensorSpec("a", "float32", ("n", None, 4)), TensorSpec("b", "float32", None)],
        ["y"],
        [Node("Gemm", "", ["a", "b"], ["y"], GemmAttrs(alpha=0.5, beta=float("-inf"), trans_a=True))],
        name="名前 with spaces",
        output_types={"y": TensorType("float32", ("n", 4))},
        metadata={"": "", "json": '{"a": [1, 2]}'},
    )
    path = tmp_path / "specs.ecnn"
    save_ecnn(graph, path)
    assert_graphs_equal(graph, load_ecnn(path, verify=True))


def test_attrs_none_round_trips(tmp_path: Path) -> None:
    graph = Graph([TensorSpec("x", "float32", (2,))], ["y"], [Node("Relu", "r", ["x"], ["y"], None)])
    save_ecnn(graph, tmp_path / "n.ecnn")
    assert load_ecnn(tmp_path / "n.ecnn").nodes[0].attrs is None


def test_sections_are_listed_for_info(tmp_path: Path, cnn_graph: Graph) -> None:
    path = tmp_path / "cnn.ecnn"
    save_ecnn(cnn_graph, path)
    sections = read_sections(path)
    assert [s.name for s in sections] == ["GRAPH", "DATA"]
    assert all(isinstance(s, SectionInfo) and s.offset % 64 == 0 and s.required for s in sections)
    data = sections[1]
    weights = sum(a.nbytes for a in cnn_graph.initializers.values())
    assert weights < data.length < weights + 64 * 8
    header = read_header(path)
    assert (header.major, header.file_size) == (FORMAT_MAJOR, path.stat().st_size)


@pytest.mark.parametrize(
    ("graph", "message"),
    [
        (
            Graph(
                [], ["y"], [Node("Identity", "i", ["w"], ["y"], NoAttrs())], {"w": np.array(["a"], object)}
            ),
            "dtype object",
        ),
        (Graph([], ["y"], [Node("NoSuchOp", "i", [], ["y"], NoAttrs())]), "NoSuchOp"),
        (Graph([], ["y"], [Node("Relu", "i", ["x"], ["y"], NoAttrs())]), "reads 'x'"),
        (
            Graph([TensorSpec("x", "float32", (1,))], ["y"], [Node("Relu", "i", ["x"], ["y"], GemmAttrs())]),
            "registered with NoAttrs",
        ),
        (
            Graph(
                [TensorSpec("x", "float32", (1,))],
                ["y"],
                [Node("Gemm", "g", ["x"], ["y"], GemmAttrs(alpha="2"))],
            ),
            "attrs.alpha",
        ),
        (
            Graph([TensorSpec("x", "float32", (1,))], ["y"], [Node("Gemm", "g", ["x"], ["y"], None)]),
            "needs a GemmAttrs",
        ),
        (
            Graph([TensorSpec("x", "float32", (-1,))], ["y"], [Node("Relu", "i", ["x"], ["y"], NoAttrs())]),
            "dimension -1",
        ),
        (
            Graph(
                [TensorSpec("x", "float32", (1,))],
                ["y"],
                [Node("Relu", "i", ["x"], ["y"], NoAttrs())],
                metadata={"k": 3},  # type: ignore[dict-item]
            ),
            "metadata",
        ),
    ],
)
def test_graphs_that_cannot_be_stored_are_refused_without_leaving_files(
    tmp_path: Path, graph: Graph, message: str
) -> None:
    with pytest.raises(GraphError, match=message):
        save_ecnn(graph, tmp_path / "bad.ecnn")
    assert list(tmp_path.iterdir()) == []
