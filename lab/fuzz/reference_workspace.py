"""How much memory numpy reference kernels allocate beyond their operands, against what planning
allows them (runtime/memory.py: the op's ``workspace`` trait, else REFERENCE_WORKSPACE times the
operands).

For each case: tracemalloc's peak during the reference call less the output it returns, as a
multiple of the bytes of its inputs and outputs, and the allowance. A case whose allocation passes
its allowance is marked OVER; the last line gives the largest ratio among ops without a trait.

    .venv/bin/python lab/fuzz/reference_workspace.py
"""

from __future__ import annotations

import tracemalloc
from typing import Any

import numpy as np

from edgecnn.ir.graph import TensorType
from edgecnn.ops.conv import ConvTransposeAttrs
from edgecnn.ops.norm import InstanceNormalizationAttrs
from edgecnn.ops.registry import NoAttrs, get_op
from edgecnn.ops.resize import ResizeAttrs
from edgecnn.ops.shape import PadAttrs, TransposeAttrs
from edgecnn.runtime.memory import REFERENCE_WORKSPACE


def cases() -> list[tuple[str, str, Any, list[np.ndarray | None]]]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 16, 64, 64), dtype=np.float32)
    out: list[tuple[str, str, Any, list[np.ndarray | None]]] = []
    for k, s in ((2, 2), (3, 2), (4, 2), (3, 1), (5, 1), (16, 8)):
        w = rng.standard_normal((16, 8, k, k), dtype=np.float32)
        attrs = ConvTransposeAttrs(kernel_shape=(k, k), strides=(s, s))
        out.append((f"ConvTranspose k{k} s{s}", "ConvTranspose", attrs, [x, w]))
    for mode in ("nearest", "linear", "cubic"):
        for scale in (2.0, 4.0):
            scales = np.array([1, 1, scale, scale], np.float32)
            out.append((f"Resize {mode} x{scale:g}", "Resize", ResizeAttrs(mode=mode), [x, None, scales]))
    pads = np.array([0, 0, 8, 8, 0, 0, 8, 8], np.int64)
    out.append(("Pad reflect", "Pad", PadAttrs(mode="reflect"), [x, pads]))
    out.append(("Transpose", "Transpose", TransposeAttrs(perm=(0, 2, 3, 1)), [x]))
    gamma, beta = np.ones(16, np.float32), np.zeros(16, np.float32)
    out.append(
        ("InstanceNormalization", "InstanceNormalization", InstanceNormalizationAttrs(), [x, gamma, beta])
    )
    for op in ("Exp", "Tanh", "Erf", "Softplus", "Mish", "Sqrt", "Neg"):
        out.append((op, op, NoAttrs(), [np.abs(x)]))
    return out


def tensor_type(array: np.ndarray | None) -> TensorType | None:
    return None if array is None else TensorType(array.dtype.name, tuple(array.shape))


def main() -> None:
    worst, over = 0.0, 0
    for label, op, attrs, inputs in cases():
        definition = get_op(op)
        operands = sum(a.nbytes for a in inputs if a is not None)
        tracemalloc.start()
        outputs = definition.run_reference(attrs, inputs)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        operands += sum(o.nbytes for o in outputs)
        beyond = peak - sum(o.nbytes for o in outputs)
        if definition.workspace is not None:
            types = [tensor_type(a) for a in inputs], [tensor_type(o) for o in outputs]
            allowed = definition.workspace(attrs, *types)
        else:
            allowed = REFERENCE_WORKSPACE * operands
            worst = max(worst, beyond / operands)
        mark = "OVER" if beyond > allowed else ""
        over += beyond > allowed
        print(
            f"{label:24s} operands {operands / 2**20:6.1f} MiB  beyond them {beyond / operands:5.2f}x"
            f"  allowed {allowed / operands:5.2f}x {mark}"
        )
    print(f"largest without a trait: {worst:.2f}x the operands; {over} case(s) over their allowance")


if __name__ == "__main__":
    main()
