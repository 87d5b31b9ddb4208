"""Concat and Split as views into the arena at batch 1: the producers write straight into their slab
of the Concat's output, the Split's parts are read where they lie, and neither step copies, whatever
kernel the step was given. Covered: a Concat of a Split's parts (YOLOv8's C2f), a branch result
written over the Split part it consumed (ShuffleNetV2's units), nested Concats, in-place activations
in a slab; and the cases that must still copy: a part read by two Concats, parts returned to the
caller, a Concat returned to the caller. Every case's outputs equal the numpy reference kernels'."""

from __future__ import annotations

import numpy as np
import pytest

from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.model import Model
from edgecnn.ops.registry import get_op
from edgecnn.ops.shape import ConcatAttrs, SplitAttrs
from edgecnn.runtime.arena import SKIP
from edgecnn.runtime.options import RuntimeOptions
from edgecnn.runtime.plan import Plan
from edgecnn.testing import run_without_arena
from kernels.support import tuned

CHANNELS, SIDE = 4, 5


def node(op: str, inputs: list[str], outputs: list[str], attrs: object = None) -> Node:
    """A node named after its first output, with the op's default attributes unless given."""
    return Node(op, outputs[0], inputs, outputs, get_op(op).attrs_type() if attrs is None else attrs)


def split(x: str, parts: list[str], sizes: str = "halves") -> Node:
    return Node("Split", "split", [x, sizes], parts, SplitAttrs(1, len(parts)))


def concat(inputs: list[str], out: str) -> Node:
    return node("Concat", inputs, [out], ConcatAttrs(1))


def check(nodes: list[Node], outputs: list[str], batch: int = 1) -> tuple[Plan, dict[str, np.ndarray]]:
    """Plan and run the graph on the CPU (no passes) and on the reference kernels; their outputs
    must agree, and the arena run must agree with a run without it."""
    graph = Graph(
        [TensorSpec("x", "float32", (batch, CHANNELS, SIDE, SIDE))],
        outputs,
        nodes,
        {"halves": np.array([CHANNELS // 2, CHANNELS // 2], np.int64)},
    )
    x = {"x": np.random.default_rng(0).standard_normal((batch, CHANNELS, SIDE, SIDE)).astype(np.float32)}
    with tuned(eltwise_min_size=0):  # compiled activations on these small maps, in place where free
        model = Model(graph, RuntimeOptions.resolve(threads=1, optimize=False))
        plan = model.plan_for(x)
        got = model.run(x)
        got_again = model.run(x)  # a second run reuses the arena
    want = Model(graph, RuntimeOptions.resolve(threads=1, device="reference", optimize=False)).run(x)
    without = run_without_arena(plan, x)
    for name in outputs:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(got_again[name], got[name])
        np.testing.assert_array_equal(without[name], got[name])
    assert all(s.kernel.name != "reference" for s in plan.steps), [s.kernel.name for s in plan.steps]
    return plan, got


def skipped(plan: Plan) -> set[str]:
    """Names of the nodes whose step does nothing at run time."""
    return {a.step.node.name for a in plan.memory.actions if a.code == SKIP}


def byte_offset(plan: Plan, part: str, whole: str) -> int | None:
    """Where ``part`` lies in ``whole`` in a fresh arena, or None when they share no memory."""
    frame = plan.memory.acquire().template
    slots = plan.program.slots
    a, b = frame[slots[part]], frame[slots[whole]]
    if a is None or b is None or not np.shares_memory(a, b):
        return None
    return int(a.ctypes.data - b.ctypes.data)


SLAB = CHANNELS // 2 * SIDE * SIDE * 4  # bytes of half the channels at batch 1


def test_a_concat_of_a_splits_parts_copies_nothing() -> None:
    # C2f: t -> (a, b); c = f(b); d = g(c); y = concat(a, b, c, d)
    nodes = [
        node("Sigmoid", ["x"], ["t"]),
        split("t", ["a", "b"]),
        node("Softmax", ["b"], ["c"]),
        node("Relu", ["c"], ["d"]),
        concat(["a", "b", "c", "d"], "y"),
        node("Relu", ["y"], ["out"]),
    ]
    plan, _ = check(nodes, ["out"])
    assert {"split", "y"} <= skipped(plan)  # the Split and the Concat
    assert [byte_offset(plan, part, "y") for part in ("t", "a", "b", "c", "d")] == [
        0,
        0,
        SLAB,
        2 * SLAB,
        3 * SLAB,
    ]


def test_a_branch_result_overwrites_the_split_part_it_consumed() -> None:
    # ShuffleNetV2's unit: (a, b) = split(t); c = h(g(b)); y = concat(a, c): c lies where b was
    nodes = [
        node("Sigmoid", ["x"], ["t"]),
        split("t", ["a", "b"]),
        node("Softmax", ["b"], ["s"]),
        node("Softmax", ["s"], ["c"]),
        concat(["a", "c"], "y"),
        node("Relu", ["y"], ["out"]),
    ]
    plan, _ = check(nodes, ["out"])
    assert {"split", "y"} <= skipped(plan)
    assert byte_offset(plan, "c", "y") == byte_offset(plan, "b", "y") == SLAB


def test_a_branch_that_reads_its_part_while_writing_copies() -> None:
    # c is written by the step that reads b: it cannot take b's place
    nodes = [
        node("Sigmoid", ["x"], ["t"]),
        split("t", ["a", "b"]),
        node("Softmax", ["b"], ["c"]),
        concat(["a", "c"], "y"),
        node("Relu", ["y"], ["out"]),
    ]
    plan, _ = check(nodes, ["out"])
    assert "y" not in skipped(plan)


def test_nested_concats_and_in_place_activations_in_a_slab() -> None:
    nodes = [
        node("Sigmoid", ["x"], ["p"]),
        node("Softmax", ["x"], ["q0"]),
        node("Relu", ["q0"], ["q"]),  # in place in q0's buffer
        concat(["p", "q"], "inner"),
        node("HardSigmoid", ["x"], ["r"]),
        concat(["inner", "r"], "y"),
        node("Relu", ["y"], ["out"]),
    ]
    plan, _ = check(nodes, ["out"])
    assert {"inner", "y"} <= skipped(plan)
    whole = CHANNELS * SIDE * SIDE * 4
    assert [byte_offset(plan, n, "y") for n in ("p", "q0", "q", "inner", "r")] == [
        0,
        whole,
        whole,
        0,
        2 * whole,
    ]


def test_a_part_read_by_two_concats_lies_in_one_and_is_copied_into_the_other() -> None:
    nodes = [
        node("Sigmoid", ["x"], ["p"]),
        node("HardSigmoid", ["x"], ["q"]),
        concat(["p", "q"], "y"),
        node("Relu", ["x"], ["r"]),
        concat(["r", "p"], "z"),
        node("Add", ["y", "z"], ["out"]),
    ]
    plan, _ = check(nodes, ["out"])
    assert len({"y", "z"} & skipped(plan)) == 1


@pytest.mark.parametrize("returned", [["y", "out"], ["a", "out"], ["c", "out"]])
def test_tensors_returned_to_the_caller_are_never_slabs_of_the_arena(returned: list[str]) -> None:
    nodes = [
        node("Sigmoid", ["x"], ["t"]),
        split("t", ["a", "b"]),
        node("Softmax", ["b"], ["c"]),
        concat(["a", "c"], "y"),
        node("Relu", ["y"], ["out"]),
    ]
    plan, got = check(nodes, returned)
    assert "y" not in skipped(plan)
    first = got[returned[0]].copy()
    assert not np.shares_memory(got[returned[0]], got["out"])
    np.testing.assert_array_equal(got[returned[0]], first)


def test_at_batch_two_the_compiled_kernels_copy_the_rows() -> None:
    nodes = [
        node("Sigmoid", ["x"], ["t"]),
        split("t", ["a", "b"]),
        node("Softmax", ["b"], ["s"]),
        node("Softmax", ["s"], ["c"]),
        concat(["a", "c"], "y"),
        node("Relu", ["y"], ["out"]),
    ]
    plan, _ = check(nodes, ["out"], batch=2)
    kernels = {s.node.name: s.kernel.name for s in plan.steps}
    assert kernels["split"] == "split" and kernels["y"] == "concat" and not {"split", "y"} & skipped(plan)
