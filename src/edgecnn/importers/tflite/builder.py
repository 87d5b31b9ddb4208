"""The state of one TFLite -> Graph conversion: which form of each TFLite tensor exists under which
edgecnn name, and the Transpose, DequantizeLinear and QuantizeLinear nodes that derive the others.

A tensor has a *layout* (``NHWC``: TFLite's own order; ``NCHW``: edgecnn's, for 4-D activations)
and a *domain* (stored: the file's dtype, int8 for quantised tensors; real: float32). Converters
ask for the form they compute in (``get``) and say which form they write (``put``); the forms they
did not produce are derived once, on first use. A tensor's bare TFLite name is its stored form in
the layout it was produced in (NHWC for graph inputs and outputs), so intermediate tensors can be
matched with LiteRT's by name (``metadata['tflite_nchw_tensors']`` lists those held as NCHW)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from edgecnn.errors import ModelFormatError
from edgecnn.importers.tflite.reader import TfliteModel, TfliteOperator, TfliteTensor
from edgecnn.ir.graph import Dim, Node
from edgecnn.ops.quant import QuantizeAttrs
from edgecnn.ops.shape import TransposeAttrs

NHWC = "nhwc"
NCHW = "nchw"
TO_NCHW = (0, 3, 1, 2)
TO_NHWC = (0, 2, 3, 1)
QUANTIZED_DTYPES = ("int8", "uint8", "int16", "int32")


def nchw_axis(axis: int) -> int:
    """Where NHWC axis ``axis`` (0..3) lies in the NCHW order."""
    return TO_NCHW.index(axis)


class ConversionError(ValueError):
    """A converter's complaint about one operator; the builder adds the operator and file."""


class GraphBuilder:
    """Collects nodes and initializers for one subgraph; converters call get/put/node/constant."""

    def __init__(self, model: TfliteModel, source: str) -> None:
        self.model = model
        self.source = source
        self.nodes: list[Node] = []
        self.initializers: dict[str, np.ndarray] = {}
        self.forms: dict[tuple[int, str, bool], str] = {}
        self.home: dict[int, str] = {}
        self.node_names: set[str] = set()
        self.unquantized: dict[int, tuple[str, str]] = {}  # tensor -> (layout, float name) to quantise
        self.graph_outputs = set(model.outputs)
        self.names = self._unique_names(model.tensors)
        self.tensors = list(model.tensors)  # DEQUANTIZE of a constant replaces its output by the value
        self.current = ""  # the operator being converted, for node names
        for index in model.inputs:
            self.home[index] = NHWC
            self.forms[(index, NHWC, False)] = self.names[index]

    @staticmethod
    def _unique_names(tensors: tuple[TfliteTensor, ...]) -> list[str]:
        seen: set[str] = set()
        names = []
        for t in tensors:
            name = t.name if t.name not in seen else f"{t.name}::{t.index}"
            seen.add(name)
            names.append(name)
        return names

    # --- what converters read ---------------------------------------------------------------

    def tensor(self, index: int) -> TfliteTensor:
        if index < 0:
            raise ConversionError("a required input is omitted")
        return self.tensors[index]

    def fold(self, index: int, value: np.ndarray) -> None:
        """Make tensor ``index`` a float constant (the output of DEQUANTIZE on fp16 or int8 weights),
        so that the operators reading it see weights they can permute at import."""
        self.tensors[index] = replace(
            self.tensors[index], data=value, dtype=str(value.dtype), quantization=None
        )

    def quantized(self, index: int) -> bool:
        t = self.tensor(index)
        return t.quantization is not None and t.dtype in QUANTIZED_DTYPES

    def constant_value(self, index: int, what: str) -> np.ndarray:
        """The contents of a constant input (shapes, axes, paddings); ConversionError if computed."""
        data = self.tensor(index).data
        if data is None:
            raise ConversionError(f"{what} must be a constant tensor")
        return data

    def dims(self, index: int) -> tuple[Dim, ...]:
        """The tensor's TFLite shape with dynamic sizes as None."""
        t = self.tensor(index)
        return tuple(None if s < 0 else d for d, s in zip(t.shape, t.signature))

    def rank(self, index: int) -> int:
        return len(self.tensor(index).shape)

    def has_layout(self, index: int, layout: str) -> bool:
        return any((index, layout, real) in self.forms for real in (False, True))

    def layout_of(self, *indices: int) -> str:
        """NCHW when every non-constant input is 4-D and one of them is already held as NCHW."""
        computed = [i for i in indices if i >= 0 and self.tensor(i).data is None]
        if (
            computed
            and all(self.rank(i) == 4 for i in computed)
            and any(self.has_layout(i, NCHW) for i in computed)
        ):
            return NCHW
        return NHWC

    # --- tensor forms -----------------------------------------------------------------------

    def name_of(self, index: int, layout: str, real: bool) -> str:
        name = self.names[index]
        if layout != self.home.get(index, layout):
            name += f"::{layout}"
        if real and self.quantized(index):
            name += "::real"
        return name

    def get(self, index: int, layout: str = NHWC, real: bool = True) -> str:
        """The edgecnn name of tensor ``index`` in ``layout``, dequantised if ``real``."""
        real = real and self.quantized(index)
        key = (index, layout, real)
        if key in self.forms:
            return self.forms[key]
        t = self.tensor(index)
        if layout == NCHW and len(t.shape) != 4:
            raise ConversionError(f"tensor '{t.name}' of rank {len(t.shape)} cannot be read as NCHW")
        if t.data is not None:
            return self._constant_form(t, layout, real)
        elif real:
            stored = self.get(index, layout, False)
            name = self.dequantize(index, stored, TO_NCHW if layout == NCHW else None)
        else:
            other = NHWC if layout == NCHW else NCHW
            source = self.forms.get((index, other, False))
            if source is None:
                raise ConversionError(f"tensor '{t.name}' is read before any operator writes it")
            name = self.name_of(index, layout, False)
            self.transpose(source, name, TO_NCHW if layout == NCHW else TO_NHWC)
        self.forms[key] = name
        return name

    def put(self, index: int, layout: str, real: bool = True) -> str:
        """The name an operator writes tensor ``index`` to, in ``layout``. For a quantised tensor
        written ``real``, that is an unquantised float the builder then quantises: readers see
        the quantised value (dequantised again), as in TFLite."""
        t = self.tensor(index)
        if t.data is not None or index in self.home:
            raise ConversionError(f"tensor '{t.name}' is written twice (or is a constant)")
        if layout == NCHW and len(t.shape) != 4:
            raise ConversionError(f"tensor '{t.name}' of rank {len(t.shape)} cannot be written as NCHW")
        self.home[index] = NHWC if index in self.graph_outputs else layout
        stored = self.name_of(index, layout, False)
        if real and self.quantized(index):
            self.unquantized[index] = (layout, f"{stored}::unquantized")
            return f"{stored}::unquantized"
        self.forms[(index, layout, False)] = stored
        return stored

    def settle(self, index: int) -> None:
        """After an operator: quantise what it wrote if it wrote floats, and make the tensor's
        bare name (stored form, home layout) exist."""
        home = self.home.get(index)
        if home is None and self.tensor(index).data is not None:
            return  # folded at import (DEQUANTIZE of weights)
        if home is None:
            raise ConversionError(f"the operator does not write its output '{self.names[index]}'")
        if index in self.unquantized:
            layout, source = self.unquantized.pop(index)
            stored = self.name_of(index, layout, False)
            self.quantize(index, source, stored, layout)
            self.forms[(index, layout, False)] = stored
        self.get(index, home, False)

    # --- emitting ---------------------------------------------------------------------------

    def node(self, op: str, attrs: Any, inputs: list[str], outputs: list[str]) -> None:
        """The operator's main node takes its name (``CONV_2D_3``), helper nodes their output's."""
        name = self.current if self.current not in self.node_names else outputs[0]
        self.node_names.add(name)
        self.nodes.append(Node(op, name, inputs, outputs, attrs))

    def constant(
        self, value: np.ndarray | float | int | list[Any], purpose: str, dtype: str = "float32"
    ) -> str:
        """A new initializer for this operator (scalars, shapes, axes), named after it."""
        name = f"{self.current}::{purpose}"
        self.initializers[name] = np.asarray(value, dtype=dtype)
        return name

    def transpose(self, source: str, target: str, perm: tuple[int, ...]) -> None:
        self.nodes.append(Node("Transpose", target, [source], [target], TransposeAttrs(perm=perm)))

    def _constant_form(self, t: TfliteTensor, layout: str, real: bool) -> str:
        if layout == NHWC:
            return self.permuted_constant(t.index, None, "", real)
        return self.permuted_constant(t.index, TO_NCHW, "nchw", real)

    def permuted_constant(self, index: int, perm: tuple[int, ...] | None, tag: str, real: bool = True) -> str:
        """A constant (weights) with its axes permuted once, at import; dequantised by a
        DequantizeLinear node when ``real`` (kept as a node so QDQ folding finds int8 weights)."""
        t = self.tensor(index)
        if t.data is None:
            raise ConversionError(f"tensor '{t.name}' must be a constant (weights)")
        if perm is not None and len(perm) != len(t.shape):
            raise ConversionError(f"constant '{t.name}' has rank {len(t.shape)}, expected {len(perm)}")
        key = (index, tag or NHWC, real and self.quantized(index))
        if key in self.forms:
            return self.forms[key]
        data = t.data if perm is None else np.ascontiguousarray(t.data.transpose(perm))
        stored = self.names[index] + (f"::{tag}" if tag else "")
        if t.dtype == "float16":  # fp16 weights: widened once here, never per run
            data = data.astype(np.float32)
            stored += "::float32"
        self.initializers[stored] = data
        name = stored
        if key[2]:
            name = self.dequantize(index, stored, perm)
        self.forms[key] = name
        return name

    def _quant_params(self, index: int, perm: tuple[int, ...] | None) -> tuple[str, str, int]:
        t = self.tensor(index)
        q = t.quantization
        assert q is not None
        base = self.names[index]
        scale = q.scale.reshape(()) if q.per_tensor else q.scale
        zero_point = q.zero_point.astype(t.dtype)
        zero_point = zero_point.reshape(()) if q.per_tensor else zero_point
        self.initializers[f"{base}::scale"] = scale
        self.initializers[f"{base}::zero_point"] = zero_point
        axis = q.axis
        if not q.per_tensor:
            if not 0 <= axis < len(t.shape) or t.shape[axis] != q.scale.size:
                raise ConversionError(
                    f"tensor '{t.name}': {q.scale.size} scales for axis {axis} of {list(t.shape)}"
                )
            if perm is not None:
                axis = perm.index(axis)
        return f"{base}::scale", f"{base}::zero_point", axis

    def dequantize(self, index: int, stored: str, perm: tuple[int, ...] | None, target: str = "") -> str:
        """DequantizeLinear of tensor ``index``'s stored form ``stored`` (axes permuted by ``perm``)."""
        scale, zero_point, axis = self._quant_params(index, perm)
        name = target or stored + "::real"
        self.nodes.append(
            Node("DequantizeLinear", name, [stored, scale, zero_point], [name], QuantizeAttrs(axis=axis))
        )
        return name

    def quantize(self, index: int, real_name: str, stored: str, layout: str) -> None:
        """QuantizeLinear of ``real_name`` into tensor ``index``'s stored form ``stored``."""
        scale, zero_point, axis = self._quant_params(index, TO_NCHW if layout == NCHW else None)
        self.nodes.append(
            Node("QuantizeLinear", stored, [real_name, scale, zero_point], [stored], QuantizeAttrs(axis=axis))
        )

    def fail(self, op: TfliteOperator, message: str) -> ModelFormatError:
        return ModelFormatError(f"{self.source}: operator {op.index} ({op.opcode}): {message}")
