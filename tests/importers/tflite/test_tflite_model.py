"""Model-level behaviour of the TFLite importer: names, signatures, layouts of intermediate
tensors, dynamic batch, unsupported operators, and the load() dispatch."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import edgecnn
from edgecnn.errors import ModelFormatError, UnsupportedOperatorError
from importers.tflite.tflite_writer import TfliteWriter

litert = pytest.importorskip("ai_edge_litert.interpreter", reason="LiteRT has no wheel here")
Interpreter, OpResolverType = litert.Interpreter, litert.OpResolverType
RNG = np.random.default_rng(11)


def conv_pool_model(batch_signature: int = 1) -> bytes:
    w = TfliteWriter()
    x = w.tensor("serving_default_image:0", (1, 8, 8, 3), signature=(batch_signature, 8, 8, 3))
    filters = w.const("filters", RNG.standard_normal((4, 3, 3, 3)).astype(np.float32))
    bias = w.const("bias", RNG.standard_normal(4).astype(np.float32))
    conv = w.tensor("model/conv/Relu", (1, 8, 8, 4), signature=(batch_signature, 8, 8, 4))
    w.op(
        "CONV_2D",
        [x, filters, bias],
        [conv],
        "Conv2DOptions",
        Padding=0,
        StrideH=1,
        StrideW=1,
        FusedActivationFunction=1,
    )
    pooled = w.tensor("model/pool/MaxPool", (1, 4, 4, 4), signature=(batch_signature, 4, 4, 4))
    w.op(
        "MAX_POOL_2D",
        [conv],
        [pooled],
        "Pool2DOptions",
        Padding=1,
        StrideH=2,
        StrideW=2,
        FilterHeight=2,
        FilterWidth=2,
    )
    mean = w.tensor("StatefulPartitionedCall:0", (1, 4), signature=(batch_signature, 4))
    w.op(
        "MEAN",
        [pooled, w.const("axes", np.array([1, 2], np.int32))],
        [mean],
        "ReducerOptions",
        KeepDims=False,
    )
    return w.build([x], [mean], {"inputs": {"image": x}, "outputs": {"embedding": mean}})


def save(tmp_path: Path, data: bytes, name: str = "model.tflite") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_names_and_signature_are_tflites(tmp_path: Path) -> None:
    model = edgecnn.load(save(tmp_path, conv_pool_model()))
    assert [(s.name, s.dtype, s.shape) for s in model.inputs] == [
        ("serving_default_image:0", "float32", (1, 8, 8, 3))
    ]
    assert [s.name for s in model.outputs] == ["StatefulPartitionedCall:0"]
    assert model.graph.metadata["tflite_signature_inputs"] == "image=serving_default_image:0"
    assert model.graph.metadata["tflite_signature_outputs"] == "embedding=StatefulPartitionedCall:0"


def test_intermediate_tensors_match_litert_by_name(tmp_path: Path) -> None:
    """Every TFLite tensor can be fetched by its name; those held as NCHW are listed in metadata."""
    data = conv_pool_model()
    image = RNG.standard_normal((1, 8, 8, 3)).astype(np.float32)
    interpreter = Interpreter(
        model_content=data,
        experimental_op_resolver_type=OpResolverType.BUILTIN_REF,
        experimental_preserve_all_tensors=True,
    )
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], image)
    interpreter.invoke()
    theirs = {d["name"]: interpreter.get_tensor(d["index"]) for d in interpreter.get_tensor_details()}
    model = edgecnn.load(save(tmp_path, data))
    names = ["model/conv/Relu", "model/pool/MaxPool", "StatefulPartitionedCall:0"]
    ours = model.run({"serving_default_image:0": image}, outputs=names)
    nchw = set(model.graph.metadata["tflite_nchw_tensors"].split(","))
    assert "model/conv/Relu" in nchw
    for name in names:
        value = ours[name].transpose(0, 2, 3, 1) if name in nchw else ours[name]
        np.testing.assert_allclose(value, theirs[name], rtol=1e-5, atol=1e-5, err_msg=name)


def test_dynamic_batch_runs_any_batch(tmp_path: Path) -> None:
    model = edgecnn.load(save(tmp_path, conv_pool_model(batch_signature=-1)))
    assert model.inputs[0].shape == (None, 8, 8, 3)
    images = RNG.standard_normal((3, 8, 8, 3)).astype(np.float32)
    batched = model.run({"serving_default_image:0": images})["StatefulPartitionedCall:0"]
    single = model.run({"serving_default_image:0": images[1:2]})["StatefulPartitionedCall:0"]
    assert batched.shape == (3, 4)
    np.testing.assert_allclose(batched[1:2], single, rtol=1e-6, atol=1e-6)


def test_unsupported_operators_are_listed_at_once(tmp_path: Path) -> None:
    w = TfliteWriter()
    x = w.tensor("x", (1, 4))
    a, b, c = w.tensor("a", (1, 4)), w.tensor("b", (1, 4)), w.tensor("c", (1, 4))
    w.op("CUMSUM", [x, w.const("axis", np.array(1, np.int32))], [a])
    w.op("RELU", [a], [b])
    w.op("SIN", [b], [c])
    d = w.tensor("d", (1, 4))
    w.op("CUSTOM:MyPostprocess", [c], [d])
    with pytest.raises(UnsupportedOperatorError) as info:
        edgecnn.load(save(tmp_path, w.build([x], [d])))
    assert info.value.unsupported == [("CUMSUM", "#0"), ("SIN", "#2"), ("CUSTOM:MyPostprocess", "#3")]


def test_a_malformed_operator_names_itself(tmp_path: Path) -> None:
    w = TfliteWriter()
    x = w.tensor("x", (1, 5, 5, 3))
    y = w.tensor("y", (1, 5, 5, 3))
    w.op(
        "MAX_POOL_2D",
        [x],
        [y],
        "Pool2DOptions",
        Padding=0,
        StrideH=0,
        StrideW=1,
        FilterHeight=2,
        FilterWidth=2,
    )
    with pytest.raises(
        ModelFormatError, match=r"operator 0 \(MAX_POOL_2D\): strides \[0, 1\] must be positive"
    ):
        edgecnn.load(save(tmp_path, w.build([x], [y])))


def test_load_sniffs_the_identifier_without_the_extension(tmp_path: Path) -> None:
    model = edgecnn.load(save(tmp_path, conv_pool_model(), "model.bytes"))
    assert model.graph.metadata["source_format"] == "tflite"


def test_weights_argument_is_refused(tmp_path: Path) -> None:
    path = save(tmp_path, conv_pool_model())
    with pytest.raises(ModelFormatError, match="carry their weights"):
        edgecnn.load(path, weights=path)


def test_dynamic_spatial_size_pads_as_tflite(tmp_path: Path) -> None:
    """With unknown height and width, SAME padding is derived per run (the odd pixel after)."""
    w = TfliteWriter()
    x = w.tensor("x", (1, 1, 1, 2), signature=(1, -1, -1, 2))
    filters = w.const("filters", RNG.standard_normal((3, 3, 3, 2)).astype(np.float32))
    y = w.tensor("y", (1, 1, 1, 3), signature=(1, -1, -1, 3))
    w.op(
        "CONV_2D",
        [x, filters, w.const("bias", np.zeros(3, np.float32))],
        [y],
        "Conv2DOptions",
        Padding=0,
        StrideH=2,
        StrideW=2,
    )
    data = w.build([x], [y])
    model = edgecnn.load(save(tmp_path, data))
    assert model.inputs[0].shape == (1, None, None, 2)
    image = RNG.standard_normal((1, 9, 12, 2)).astype(np.float32)
    interpreter = Interpreter(model_content=data, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    interpreter.resize_tensor_input(interpreter.get_input_details()[0]["index"], image.shape)
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], image)
    interpreter.invoke()
    want = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
    np.testing.assert_allclose(model.run({"x": image})["y"], want, rtol=1e-5, atol=1e-5)


def test_missing_tflite_package_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from edgecnn.errors import ConfigurationError

    monkeypatch.setitem(sys.modules, "tflite", None)  # makes `import tflite` raise ImportError
    with pytest.raises(ConfigurationError, match=r"pip install 'edgecnn\[tflite\]'"):
        edgecnn.load(save(tmp_path, conv_pool_model()))
