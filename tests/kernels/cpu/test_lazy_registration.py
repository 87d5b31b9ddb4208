"""Kernel modules declared with register_module are imported when their op is first planned: the
kernel is then chosen and runs as if it had been imported eagerly; other ops do not import it; two
threads planning at once both get it; a failing import fails every time; KERNEL_MODULES lists
exactly what each CPU kernel module registers."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import numpy as np
import pytest

import edgecnn.kernels.cpu
from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels import registry
from edgecnn.kernels.cpu import KERNEL_MODULES
from edgecnn.kernels.cpu.selection import FAMILIES
from edgecnn.kernels.registry import (
    candidate_kernels,
    import_pending,
    register_module,
    scoped_registrations,
    select_kernel,
)
from edgecnn.ops.pool import MaxPoolAttrs
from edgecnn.ops.registry import NoAttrs

PROBE = """
import time

import numpy as np

from edgecnn.kernels.registry import register_kernel

time.sleep({delay})


def probe_relu(node, types, values):
    def run(x):
        return np.maximum(x, np.float32(0))

    return run


register_kernel("Relu", priority=99, name="probe_relu")(probe_relu)
"""


def relu() -> tuple[Node, list[TensorType | None], list[np.ndarray | None]]:
    return Node("Relu", "act", ["x"], ["y"], NoAttrs()), [TensorType("float32", (2, 3))], [None]


def probe_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str) -> str:
    """A fresh module importable under a unique name (removed from sys.modules at teardown)."""
    name = f"edgecnn_probe_{uuid.uuid4().hex}"
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    return name


def test_declared_module_is_imported_when_its_op_is_planned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = probe_module(tmp_path, monkeypatch, PROBE.format(delay=0))
    node, types, values = relu()
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    with scoped_registrations():
        register_module(name, ["Relu"])
        pool = Node("MaxPool", "pool", ["x"], ["y"], MaxPoolAttrs(kernel_shape=(2, 2)))
        select_kernel(pool, [TensorType("float32", (1, 1, 4, 4))], [None], "cpu")
        assert name not in sys.modules  # another op's planning does not import it
        choice = select_kernel(node, types, values, "cpu")
        assert name in sys.modules
        assert choice.name == "probe_relu"
        np.testing.assert_array_equal(choice.run(x), np.maximum(x, 0))
        assert next(e.name for e in candidate_kernels(node, types, values)) == "probe_relu"
    assert select_kernel(node, types, values, "cpu").name != "probe_relu"  # the scope undid it


def test_declaration_unused_inside_a_scope_is_forgotten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = probe_module(tmp_path, monkeypatch, PROBE.format(delay=0))
    with scoped_registrations():
        register_module(name, ["Relu"])
    node, types, values = relu()
    assert select_kernel(node, types, values, "cpu").name != "probe_relu"
    assert name not in sys.modules


def test_threads_planning_at_once_both_get_the_lazy_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = probe_module(tmp_path, monkeypatch, PROBE.format(delay=0.3))  # a slow import
    node, types, values = relu()
    chosen: list[str] = []
    with scoped_registrations():
        register_module(name, ["Relu"])
        workers = [
            threading.Thread(target=lambda: chosen.append(select_kernel(node, types, values, "cpu").name))
            for _ in range(2)
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    assert chosen == ["probe_relu", "probe_relu"]


def test_a_module_that_fails_to_import_fails_every_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = probe_module(tmp_path, monkeypatch, "raise ImportError('probe is broken')\n")
    node, types, values = relu()
    with scoped_registrations():
        register_module(name, ["Relu"])
        for _ in range(2):
            with pytest.raises(ImportError, match="probe is broken"):
                select_kernel(node, types, values, "cpu")


def test_kernel_modules_list_exactly_the_ops_they_register() -> None:
    import_pending("cpu")
    registered: dict[str, set[str]] = {}
    for (op, kind), entries in registry._KERNELS.items():
        if kind == "cpu":
            for entry in entries:
                registered.setdefault(entry.factory.__module__, set()).add(op)
    for module, ops in KERNEL_MODULES.items():
        assert registered.get(f"edgecnn.kernels.cpu.{module}") == set(ops), module


def test_every_module_that_registers_kernels_is_declared() -> None:
    """A kernel module missing from KERNEL_MODULES would never be imported, so never chosen."""
    package = Path(edgecnn.kernels.cpu.__file__).parent
    registering = {
        ".".join(path.relative_to(package).with_suffix("").parts)
        for path in package.rglob("*.py")
        if re.search(r"^register\(", path.read_text(encoding="utf-8"), re.MULTILINE)
    }
    assert registering <= set(KERNEL_MODULES), "list their kernels in kernels/cpu/selection.py"


def test_kernels_are_tried_in_the_order_of_the_selection_table() -> None:
    import_pending("cpu")
    for family in FAMILIES.values():
        for op in family.ops:
            names = [entry.name for entry in registry._KERNELS[(op, "cpu")]]
            assert names == [name for name, _ in family.kernels], op


def test_fresh_process_imports_only_the_kernel_modules_of_planned_ops() -> None:
    code = """
import json, sys
import edgecnn.kernels.cpu
from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.registry import select_kernel
from edgecnn.ops.registry import NoAttrs
before = sorted(m for m in sys.modules if m.startswith("edgecnn.kernels.cpu."))
choice = select_kernel(Node("Relu", "act", ["x"], ["y"], NoAttrs()), [TensorType("float32", (64, 64))], [None])
after = sorted(m for m in sys.modules if m.startswith("edgecnn.kernels.cpu."))
print(json.dumps([before, after, choice.name]))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    before, after, chosen = json.loads(out.stdout.strip().splitlines()[-1])
    assert before == [
        "edgecnn.kernels.cpu.selection",
        "edgecnn.kernels.cpu.system",
        "edgecnn.kernels.cpu.system.affinity",
        "edgecnn.kernels.cpu.system.compile_notice",
        "edgecnn.kernels.cpu.system.kernel_cache",
        "edgecnn.kernels.cpu.system.numba_start",
        "edgecnn.kernels.cpu.system.startup",
        "edgecnn.kernels.cpu.system.threads",
        "edgecnn.kernels.cpu.tuning_record",
    ]
    assert chosen == "activation"
    assert "edgecnn.kernels.cpu.eltwise" in after
    for unused in ("conv", "int8", "lrn", "pool", "sparse", "gemm.steps", "gemm.microkernel"):
        # eltwise shares the fused activation of gemm.epilogue, not the GEMM kernels
        assert not any(m.startswith(f"edgecnn.kernels.cpu.{unused}") for m in after)
