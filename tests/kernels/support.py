"""Run one node with the fast CPU kernels and with the numpy reference, and compare."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
from hypothesis import strategies as st

from edgecnn.ir.dtypes import dtype_name
from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.kernels.cpu.system.threads import cpu_threads
from edgecnn.kernels.cpu.tuning_record import active_cpu_tuning, using_cpu_tuning
from edgecnn.model import Model
from edgecnn.ops.fused import ACTIVATIONS, FusedConvAttrs
from edgecnn.runtime.options import RuntimeOptions


def fast_run(
    op: str, attrs: Any, inputs: Sequence[np.ndarray | None], constant_inputs: Sequence[int], threads: int
) -> tuple[np.ndarray, str]:
    """The node's output on device "cpu" (no graph passes) and the name of the kernel that ran."""
    names = ["" if x is None else f"in{i}" for i, x in enumerate(inputs)]
    runtime = [i for i, x in enumerate(inputs) if x is not None and i not in constant_inputs]
    graph = Graph(
        [TensorSpec(names[i], dtype_name(inputs[i].dtype), tuple(inputs[i].shape)) for i in runtime],  # type: ignore[union-attr]
        ["out"],
        [Node(op, "node", names, ["out"], attrs)],
        {names[i]: np.asarray(inputs[i]) for i in constant_inputs if inputs[i] is not None},
        name=op,
    )
    model = Model(graph, RuntimeOptions.resolve(threads=threads, device="cpu", optimize=False))
    feeds = {names[i]: inputs[i] for i in runtime}
    (step,) = model.plan_for(feeds).steps
    with cpu_threads(threads):
        out = model.run(feeds)["out"]
    return out, step.kernel.name


def drawn_conv_layer(
    draw: st.DrawFn,
    kernel: tuple[int, int],
    channels: Sequence[int],
    largest: tuple[int, int, int],  # height, width, pad of one side
    most_outputs: int,
) -> dict[str, Any]:
    """A random FusedConv case with this kernel: input shape (batch 1-2, one of ``channels``, a map
    no larger than ``largest`` that the window fits), 1 to ``most_outputs`` filters, strides 1-3,
    dilations 1-2, padding of every side, any activation, bias or not, 1 or 2 threads, a seed."""
    dilations = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    pads = tuple(draw(st.integers(0, largest[2])) for _ in range(4))
    spans = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    return {
        "x_shape": (
            draw(st.integers(1, 2)),
            draw(st.sampled_from(list(channels))),
            draw(st.integers(max(1, spans[0] - pads[0] - pads[2]), largest[0])),
            draw(st.integers(max(1, spans[1] - pads[1] - pads[3]), largest[1])),
        ),
        "out_channels": draw(st.integers(1, most_outputs)),
        "attrs": FusedConvAttrs(
            kernel_shape=kernel,
            strides=(draw(st.integers(1, 3)), draw(st.integers(1, 3))),
            dilations=dilations,
            pads=pads,
            activation=draw(st.sampled_from(ACTIVATIONS)),
            negative_slope=0.2,
            low=-0.5,
            high=1.5,
        ),
        "bias": draw(st.booleans()),
        "threads": draw(st.sampled_from([1, 2])),
        "seed": draw(st.integers(0, 2**16)),
    }


@contextmanager
def tuned(**fields: Any) -> Iterator[None]:
    """The kernels' rules with ``fields`` of the CPU tuning record in effect changed, inside the block."""
    with using_cpu_tuning(dataclasses.replace(active_cpu_tuning(), **fields)):
        yield


Retune = Callable[..., None]
"""``retune(**fields)``: ``tuned(**fields)`` for the rest of a test (the ``retune`` fixture)."""
