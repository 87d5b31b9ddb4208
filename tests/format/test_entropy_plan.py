"""``entropy_plan`` (which tensors get a coder) and ``edgecnn compress --entropy``."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from edgecnn.cli import compress_cmd
from edgecnn.errors import GraphError
from edgecnn.format import load_ecnn, read_header
from edgecnn.format.entropy_plan import MIN_BYTES, entropy_plan
from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.ops.registry import NoAttrs

FACE_ONNX = Path(str(resources.files("edgecnn") / "data" / "simplecnn" / "face_binary_cls.onnx"))


def graph_of(**arrays: np.ndarray) -> Graph:
    names = list(arrays)
    nodes = [Node("Add", f"add{i}", ["x", n], [f"y{i}"], NoAttrs()) for i, n in enumerate(names)]
    spec = TensorSpec("x", "float32", (1,))
    return Graph([spec], [f"y{i}" for i in range(len(names))], nodes, dict(arrays))


def test_only_tensors_the_coder_shrinks_are_coded() -> None:
    rng = np.random.default_rng(0)
    graph = graph_of(
        zeros=np.zeros(4096, np.float32),  # compresses to nothing
        noise=rng.integers(0, 2**32, 4096, dtype=np.uint32).view(np.float32),  # random bits: incompressible
        tiny=np.zeros(MIN_BYTES // 4 - 1, np.float32),  # below MIN_BYTES
        sparse=np.where(rng.random((64, 64)) < 0.1, rng.standard_normal((64, 64)), 0).astype(np.float32),
    )
    plan = entropy_plan(graph, {"sparse": "csr:int8"}, "zlib")
    assert plan == {"zeros": "raw+zlib", "sparse": "csr:int8+zlib"}


def test_an_already_coded_choice_is_kept_and_a_bad_coder_refused() -> None:
    graph = graph_of(zeros=np.zeros(4096, np.float32))
    assert entropy_plan(graph, {"zeros": "raw+lzma"}, "zlib") == {"zeros": "raw+lzma"}
    with pytest.raises(GraphError, match="unknown entropy coder 'gzip'"):
        entropy_plan(graph, {}, "gzip")


def invoke(*args: str) -> object:
    app = typer.Typer()
    app.command(compress_cmd.NAME)(compress_cmd.command)
    app.callback()(lambda: None)
    return CliRunner().invoke(app, ["compress", *args])


@pytest.mark.parametrize("coder", ["zlib", "lzma"])
def test_compress_entropy_option(tmp_path: Path, coder: str) -> None:
    plain, coded = tmp_path / "plain.ecnn", tmp_path / "coded.ecnn"
    common = ["--prune", "0.3", "--quantize", "int8", "--iterations", "1", "--samples", "1", "--threads", "1"]
    for out, extra in ((plain, []), (coded, ["--entropy", coder])):
        result = invoke(str(FACE_ONNX), *common, *extra, "-o", str(out))
        assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    assert read_header(coded).minor == 2 and read_header(plain).minor == 1
    assert coded.stat().st_size < 0.9 * plain.stat().st_size
    a, b = load_ecnn(plain, verify=True), load_ecnn(coded, verify=True)
    for name, value in a.initializers.items():
        np.testing.assert_array_equal(b.initializers[name], value)


def test_compress_refuses_an_unknown_coder(tmp_path: Path) -> None:
    result = invoke(str(FACE_ONNX), "--entropy", "gzip", "-o", str(tmp_path / "x.ecnn"))
    assert result.exit_code != 0 and "use zlib or lzma" in result.output  # type: ignore[attr-defined]
