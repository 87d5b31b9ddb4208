"""Write small .tflite files for the tests with the flatbuffers builder and the ``tflite`` package's
generated schema functions (the same tables TFLite's converter writes)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

flatbuffers = pytest.importorskip("flatbuffers")
tflite = pytest.importorskip("tflite")

TYPE_CODES = {
    "float32": 0,
    "float16": 1,
    "int32": 2,
    "uint8": 3,
    "int64": 4,
    "bool": 6,
    "int16": 7,
    "int8": 9,
}


@dataclass
class QuantParams:
    scale: list[float]
    zero_point: list[int]
    axis: int = 0


@dataclass
class _Tensor:
    name: str
    shape: tuple[int, ...]
    dtype: str
    buffer: int
    quant: QuantParams | None
    signature: tuple[int, ...] | None


@dataclass
class _Op:
    opcode: str
    inputs: list[int]
    outputs: list[int]
    options_type: str | None
    options: dict[str, Any]


@dataclass
class TfliteWriter:
    """Tensors, constant buffers and operators of one subgraph, serialised by ``build``."""

    tensors: list[_Tensor] = field(default_factory=list)
    buffers: list[bytes] = field(default_factory=lambda: [b""])
    ops: list[_Op] = field(default_factory=list)

    def tensor(
        self,
        name: str,
        shape: tuple[int, ...],
        dtype: str = "float32",
        quant: QuantParams | None = None,
        signature: tuple[int, ...] | None = None,
    ) -> int:
        self.tensors.append(_Tensor(name, tuple(shape), dtype, 0, quant, signature))
        return len(self.tensors) - 1

    def const(self, name: str, value: Any, dtype: str | None = None, quant: QuantParams | None = None) -> int:
        array = np.asarray(value, dtype=dtype)
        self.buffers.append(array.astype(array.dtype.newbyteorder("<")).tobytes())
        self.tensors.append(_Tensor(name, array.shape, array.dtype.name, len(self.buffers) - 1, quant, None))
        return len(self.tensors) - 1

    def op(
        self,
        opcode: str,
        inputs: list[int],
        outputs: list[int],
        options_type: str | None = None,
        **options: Any,
    ) -> None:
        self.ops.append(_Op(opcode, inputs, outputs, options_type, options))

    def build(
        self, inputs: list[int], outputs: list[int], signature: dict[str, dict[str, int]] | None = None
    ) -> bytes:
        b = flatbuffers.Builder(1024)
        opcodes = sorted({op.opcode for op in self.ops})
        buffers = [_buffer(b, data) for data in self.buffers]
        tensors = [self._tensor(b, t) for t in self.tensors]
        ops = [self._op(b, op, opcodes.index(op.opcode)) for op in self.ops]
        codes = [_opcode(b, name) for name in opcodes]
        name = b.CreateString("test_graph")
        sub_tensors = _table_vector(b, tflite.SubGraphStartTensorsVector, tensors)
        sub_inputs = _int_vector(b, tflite.SubGraphStartInputsVector, inputs)
        sub_outputs = _int_vector(b, tflite.SubGraphStartOutputsVector, outputs)
        sub_ops = _table_vector(b, tflite.SubGraphStartOperatorsVector, ops)
        tflite.SubGraphStart(b)
        tflite.SubGraphAddTensors(b, sub_tensors)
        tflite.SubGraphAddInputs(b, sub_inputs)
        tflite.SubGraphAddOutputs(b, sub_outputs)
        tflite.SubGraphAddOperators(b, sub_ops)
        tflite.SubGraphAddName(b, name)
        subgraph = tflite.SubGraphEnd(b)
        signatures = [] if signature is None else [_signature(b, signature)]
        description = b.CreateString("written by edgecnn's tests")
        model_codes = _table_vector(b, tflite.ModelStartOperatorCodesVector, codes)
        model_subgraphs = _table_vector(b, tflite.ModelStartSubgraphsVector, [subgraph])
        model_buffers = _table_vector(b, tflite.ModelStartBuffersVector, buffers)
        model_signatures = _table_vector(b, tflite.ModelStartSignatureDefsVector, signatures)
        tflite.ModelStart(b)
        tflite.ModelAddVersion(b, 3)
        tflite.ModelAddOperatorCodes(b, model_codes)
        tflite.ModelAddSubgraphs(b, model_subgraphs)
        tflite.ModelAddDescription(b, description)
        tflite.ModelAddBuffers(b, model_buffers)
        if signatures:
            tflite.ModelAddSignatureDefs(b, model_signatures)
        b.Finish(tflite.ModelEnd(b), file_identifier=b"TFL3")
        return bytes(b.Output())

    def _tensor(self, b: flatbuffers.Builder, t: _Tensor) -> int:
        name = b.CreateString(t.name)
        shape = _int_vector(b, tflite.TensorStartShapeVector, list(t.shape))
        signature = (
            None
            if t.signature is None
            else _int_vector(b, tflite.TensorStartShapeSignatureVector, list(t.signature))
        )
        quant = None if t.quant is None else _quantization(b, t.quant)
        tflite.TensorStart(b)
        tflite.TensorAddShape(b, shape)
        if signature is not None:
            tflite.TensorAddShapeSignature(b, signature)
        tflite.TensorAddType(b, TYPE_CODES[t.dtype])
        tflite.TensorAddBuffer(b, t.buffer)
        tflite.TensorAddName(b, name)
        if quant is not None:
            tflite.TensorAddQuantization(b, quant)
        return tflite.TensorEnd(b)

    def _op(self, b: flatbuffers.Builder, op: _Op, code: int) -> int:
        options = None if op.options_type is None else _options(b, op.options_type, op.options)
        inputs = _int_vector(b, tflite.OperatorStartInputsVector, op.inputs)
        outputs = _int_vector(b, tflite.OperatorStartOutputsVector, op.outputs)
        tflite.OperatorStart(b)
        tflite.OperatorAddOpcodeIndex(b, code)
        tflite.OperatorAddInputs(b, inputs)
        tflite.OperatorAddOutputs(b, outputs)
        if options is not None:
            assert op.options_type is not None
            tflite.OperatorAddBuiltinOptionsType(b, getattr(tflite.BuiltinOptions, op.options_type))
            tflite.OperatorAddBuiltinOptions(b, options)
        return tflite.OperatorEnd(b)


def _buffer(b: flatbuffers.Builder, data: bytes) -> int:
    vector = None
    if data:
        b.StartVector(1, len(data), 16)  # TFLite's converter aligns constant data to 16 bytes
        b.head = b.head - len(data)
        b.Bytes[b.head : b.head + len(data)] = data
        vector = b.EndVector()
    tflite.BufferStart(b)
    if vector is not None:
        tflite.BufferAddData(b, vector)
    return tflite.BufferEnd(b)


def _opcode(b: flatbuffers.Builder, name: str) -> int:
    """A builtin by name, or ``CUSTOM:<code>`` for a custom operator."""
    custom = b.CreateString(name.split(":", 1)[1]) if name.startswith("CUSTOM:") else None
    code = getattr(tflite.BuiltinOperator, name.split(":", 1)[0])
    tflite.OperatorCodeStart(b)
    if custom is not None:
        tflite.OperatorCodeAddCustomCode(b, custom)
    tflite.OperatorCodeAddDeprecatedBuiltinCode(b, min(code, 127))
    tflite.OperatorCodeAddBuiltinCode(b, code)
    tflite.OperatorCodeAddVersion(b, 1)
    return tflite.OperatorCodeEnd(b)


def _int_vector(b: flatbuffers.Builder, start: Any, values: list[int]) -> int:
    start(b, len(values))
    for v in reversed(values):
        b.PrependInt32(int(v))
    return b.EndVector()


def _table_vector(b: flatbuffers.Builder, start: Any, offsets: list[int]) -> int:
    start(b, len(offsets))
    for offset in reversed(offsets):
        b.PrependUOffsetTRelative(offset)
    return b.EndVector()


def _quantization(b: flatbuffers.Builder, q: QuantParams) -> int:
    tflite.QuantizationParametersStartScaleVector(b, len(q.scale))
    for s in reversed(q.scale):
        b.PrependFloat32(float(s))
    scale = b.EndVector()
    tflite.QuantizationParametersStartZeroPointVector(b, len(q.zero_point))
    for z in reversed(q.zero_point):
        b.PrependInt64(int(z))
    zero_point = b.EndVector()
    tflite.QuantizationParametersStart(b)
    tflite.QuantizationParametersAddScale(b, scale)
    tflite.QuantizationParametersAddZeroPoint(b, zero_point)
    tflite.QuantizationParametersAddQuantizedDimension(b, q.axis)
    return tflite.QuantizationParametersEnd(b)


def _options(b: flatbuffers.Builder, kind: str, values: dict[str, Any]) -> int:
    """An options table through the generated ``<kind>Start/Add<Field>/End`` functions; list values
    become int32 vectors (NewShape, SqueezeDims)."""
    module = importlib.import_module(f"tflite.{kind}")
    vectors = {
        key: _int_vector(b, getattr(module, f"{kind}Start{key}Vector"), value)
        for key, value in values.items()
        if isinstance(value, list)
    }
    getattr(module, f"{kind}Start")(b)
    for key, value in values.items():
        getattr(module, f"{kind}Add{key}")(b, vectors.get(key, value))
    return int(getattr(module, f"{kind}End")(b))


def _signature(b: flatbuffers.Builder, signature: dict[str, dict[str, int]]) -> int:
    maps = []
    for side in ("inputs", "outputs"):
        entries = []
        for name, index in signature[side].items():
            text = b.CreateString(name)
            tflite.TensorMapStart(b)
            tflite.TensorMapAddName(b, text)
            tflite.TensorMapAddTensorIndex(b, index)
            entries.append(tflite.TensorMapEnd(b))
        start = (
            tflite.SignatureDefStartInputsVector
            if side == "inputs"
            else tflite.SignatureDefStartOutputsVector
        )
        maps.append(_table_vector(b, start, entries))
    key = b.CreateString("serving_default")
    tflite.SignatureDefStart(b)
    tflite.SignatureDefAddInputs(b, maps[0])
    tflite.SignatureDefAddOutputs(b, maps[1])
    tflite.SignatureDefAddSignatureKey(b, key)
    tflite.SignatureDefAddSubgraphIndex(b, 0)
    return tflite.SignatureDefEnd(b)
