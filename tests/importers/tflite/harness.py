"""Run a written .tflite model in LiteRT and in edgecnn on the same inputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import edgecnn

Interpreter = pytest.importorskip("ai_edge_litert.interpreter", reason="LiteRT has no wheel here").Interpreter


def run_litert(data: bytes, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Outputs by tensor name, from LiteRT's reference kernels (the semantics the importer maps)."""
    interpreter = Interpreter(model_content=data, experimental_op_resolver_type=_builtin_ref())
    interpreter.allocate_tensors()
    for detail in interpreter.get_input_details():
        interpreter.set_tensor(detail["index"], feeds[detail["name"]])
    interpreter.invoke()
    return {d["name"]: interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()}


def _builtin_ref() -> object:
    return pytest.importorskip("ai_edge_litert.interpreter").OpResolverType.BUILTIN_REF


def run_both(
    tmp_path: Path, data: bytes, feeds: dict[str, np.ndarray]
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(LiteRT's outputs, edgecnn's outputs), both by TFLite tensor name."""
    path = tmp_path / "model.tflite"
    path.write_bytes(data)
    model = edgecnn.load(path)
    return run_litert(data, feeds), model.run(feeds)


def assert_float_match(
    expected: dict[str, np.ndarray], actual: dict[str, np.ndarray], rtol: float = 1e-5
) -> None:
    """Within ``rtol`` relative to the output's largest magnitude (absolute slack for values near 0)."""
    assert set(expected) == set(actual)
    for name, want in expected.items():
        got = actual[name]
        assert got.shape == want.shape, name
        assert got.dtype == want.dtype, name
        scale = max(float(np.abs(want).max(initial=0.0)), 1e-6)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale, err_msg=name)
