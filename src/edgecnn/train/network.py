"""A Graph run for training: forward keeps each node's cache on a tape, backward walks the tape in
reverse to the gradients of the graph's float initializers (the parameters)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from edgecnn.errors import GraphError, InputError, UnsupportedOperatorError
from edgecnn.ir.graph import Graph, Node
from edgecnn.ops.activation import SoftmaxAttrs
from edgecnn.ops.registry import known_ops
from edgecnn.train.registry import Context, Forward, GradDef, get_grad


class NodeHook(Protocol):
    """Called around every node's forward ("forward") and backward ("backward") (for timing)."""

    def before(self, node: Node, phase: str) -> None: ...

    def after(self, node: Node, phase: str) -> None: ...


@dataclass
class Tape:
    """What one forward pass recorded: each node's Forward, in execution order."""

    records: list[tuple[Node, Forward]]


def _is_final_softmax(node: Node, rank: int = 2) -> bool:
    attrs = node.attrs if isinstance(node.attrs, SoftmaxAttrs) else SoftmaxAttrs()
    return node.op == "Softmax" and attrs.axis in (-1, rank - 1)


class Network:
    """Trainable view of a single-input, single-output classifier graph.

    A trailing Softmax is left out: training reads its input (the logits) and applies softmax
    cross-entropy, which is the same model with a better-conditioned gradient."""

    def __init__(self, graph: Graph) -> None:
        graph.verify(known_ops())
        self.source = graph.topologically_sorted()
        inputs = [s for s in self.source.inputs if s.name not in self.source.initializers]
        if len(inputs) != 1 or len(self.source.outputs) != 1:
            raise GraphError(
                f"graph '{graph.name}': training needs one input and one output, "
                f"got {len(inputs)} input(s) and {len(self.source.outputs)} output(s)"
            )
        self.input_name = inputs[0].name
        producers = self.source.producers()
        self.logits_name = self.source.outputs[0]
        final = producers.get(self.logits_name)
        self.head: Node | None = None
        if final is not None and _is_final_softmax(final):
            self.head, self.logits_name = final, final.inputs[0]
        self.nodes = self._needed_nodes(producers)
        found = [(n, get_grad(n.op)) for n in self.nodes]
        unsupported = [(n.op, n.name) for n, grad in found if grad is None]
        if unsupported:
            raise UnsupportedOperatorError(unsupported, source=f"training graph '{graph.name}' (no backward)")
        self.grads: dict[str, GradDef] = {n.name: grad for n, grad in found if grad is not None}
        self.values = {name: np.array(a, copy=True) for name, a in self.source.initializers.items()}
        self.parameters = self._find_parameters()
        self._requires = self._requires_grad()

    def _needed_nodes(self, producers: dict[str, Node]) -> list[Node]:
        wanted, stack = set(), [self.logits_name]
        while stack:
            name = stack.pop()
            node = producers.get(name)
            if node is not None and node.name not in wanted:
                wanted.add(node.name)
                stack.extend(i for i in node.inputs if i)
        return [n for n in self.source.nodes if n.name in wanted]

    def _find_parameters(self) -> list[str]:
        found: list[str] = []
        for node in self.nodes:
            for slot in self.grads[node.name].differentiable:
                name = node.inputs[slot] if slot < len(node.inputs) else ""
                if name in self.values and self.values[name].dtype.kind == "f" and name not in found:
                    found.append(name)
        return found

    def _requires_grad(self) -> set[str]:
        requires = set(self.parameters)
        for node in self.nodes:
            slots = self.grads[node.name].differentiable
            if any(node.inputs[s] in requires for s in slots if s < len(node.inputs)):
                requires.update(o for o in node.outputs if o)
        return requires

    def forward(self, x: np.ndarray, ctx: Context, hooks: Sequence[NodeHook] = ()) -> tuple[np.ndarray, Tape]:
        """Logits for the batch ``x``; in training mode state inputs (running statistics) are updated."""
        tensors: dict[str, np.ndarray] = {self.input_name: x}
        tensors.update(self.values)
        records: list[tuple[Node, Forward]] = []
        for node in self.nodes:
            inputs = [tensors[i] if i else None for i in node.inputs]
            for hook in hooks:
                hook.before(node, "forward")
            try:
                result = self.grads[node.name].forward(node.attrs, inputs, ctx)
            except ValueError as exc:
                raise GraphError(f"node {node}: {exc}") from None
            for hook in hooks:
                hook.after(node, "forward")
            for index, value in result.updates.items():
                self.values[node.inputs[index]] = value
            for name, value in zip(node.outputs, result.outputs):
                if name:
                    tensors[name] = value
            records.append((node, result))
        return tensors[self.logits_name], Tape(records)

    def backward(
        self, tape: Tape, dlogits: np.ndarray, hooks: Sequence[NodeHook] = ()
    ) -> dict[str, np.ndarray]:
        """Gradients of every parameter from d loss / d logits (parameters not reached get zeros)."""
        grads: dict[str, np.ndarray] = {self.logits_name: dlogits}
        for node, record in reversed(tape.records):
            dy = grads.pop(node.outputs[0], None)
            if dy is None:
                continue
            slots = self.grads[node.name].differentiable
            needed = [i in slots and name in self._requires for i, name in enumerate(node.inputs)]
            for hook in hooks:
                hook.before(node, "backward")
            input_grads = self.grads[node.name].backward(node.attrs, record.cache, dy, needed)
            for hook in hooks:
                hook.after(node, "backward")
            for name, grad, need in zip(node.inputs, input_grads, needed):
                if grad is None or not need:
                    continue
                grads[name] = grads[name] + grad if name in grads else grad
        return {p: grads.get(p, np.zeros_like(self.values[p])) for p in self.parameters}

    def graph(self) -> Graph:
        """The source graph (Softmax head included) carrying the current parameter values."""
        result = self.source.copy()
        result.initializers = {name: np.array(value, copy=True) for name, value in self.values.items()}
        return result

    def check_input(self, x: np.ndarray) -> None:
        spec = next(s for s in self.source.inputs if s.name == self.input_name)
        if spec.shape is not None and len(spec.shape) == x.ndim:
            for want, got in zip(spec.shape[1:], x.shape[1:]):
                if isinstance(want, int) and want != got:
                    raise InputError(
                        f"input '{spec.name}' expects shape {list(spec.shape)}, the data has {list(x.shape)}"
                    )
        elif spec.shape is not None:
            raise InputError(
                f"input '{spec.name}' expects rank {len(spec.shape)}, the data has {list(x.shape)}"
            )
