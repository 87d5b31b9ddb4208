"""No import loops between edgecnn's packages, and every import goes down the layers below.

Every module under ``src/edgecnn`` is parsed (imports at module level and inside functions alike;
imports under ``if TYPE_CHECKING:`` are ignored, they never run) and mapped to its package: the
top-level subpackage or module of ``edgecnn`` (``ir``, ``ops``, ``runtime``, ``devices``...), with
``kernels.cpu``, ``kernels.gpu``, ``kernels.opencl`` and ``kernels.cuda`` counted as packages of
their own. One test fails on every loop between two or more packages, the other on every import
of a package from a lower layer than its own. Loops inside one package (operators or converters
registering on import) are fine, and so is the one registration loop across packages: the kernel
registry (``edgecnn.kernels.registry``) imports a backend when a plan first asks for it, and the
backend's modules import the registry to register their kernels. A backend's import of the
registry is therefore not counted; any other import of ``kernels`` from a backend is.

The layering, bottom to top (``LAYERS``; a package imports its own layer and the ones below):

1. ``errors``, ``paths``, ``limits``, ``atomic``, ``edgecnn`` -- error types, the cache directory,
   the memory budget, atomic file writes, the package itself
   (which loads only ``errors`` and ``__version__`` at import; ``load`` and ``Model`` lazily)
2. ``energy``, ``detection`` -- power meters; detection heads decoded in plain numpy (no graph)
3. ``ir`` -- Graph, Node, TensorType
4. ``ops`` -- operator definitions: attributes, shapes, traits, reference kernels
5. ``format``, ``devices`` -- the .ecnn file format; device names, discovery, the machine description
6. ``kernels.cpu``, ``kernels.gpu`` -- the CPU backend; what the GPU backends share
7. ``kernels.opencl``, ``kernels.cuda`` -- the two GPU backends, siblings that never import each other
8. ``kernels`` -- the registry that chooses among the backends, the tuning cache
9. ``runtime`` -- RuntimeOptions, shape inference, Plan, the executor
10. ``passes``, ``analysis``, ``profiling`` -- graph rewrites, static analysis, per-layer timing hooks
11. ``model`` -- Model: a graph with its cached plans
12. ``importers``, ``api`` -- foreign formats to Graph (the ONNX backend-test adapter runs a Model);
    ``edgecnn.load``, where the options and the environment are read for a model
13. ``testing``, ``train``, ``bench``, ``vision`` -- applications on top of Model (detection: frames,
    detectors, drawing)
14. ``compress``, ``hetero``, ``monitor``, ``batch``, ``compare``, ``radar``, ``dvfs`` --
    applications that use those (retraining; benchmark models; the live monitoring page on the
    detectors; offline batch inference on all cores or Ray; layer-by-layer comparison with other
    engines; seed 003's radar classifier; frequency control and the scene-aware governor)
15. ``cli``, ``__main__`` -- the command line, which reads its options and the environment
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import edgecnn

SRC = Path(edgecnn.__file__).parent
KERNEL_BACKENDS = ("cpu", "gpu", "opencl", "cuda")
REGISTRY = "edgecnn.kernels.registry"

Edge = tuple[str, str]

LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "paths", "limits", "atomic", "edgecnn"),
    ("energy", "detection"),
    ("ir",),
    ("ops",),
    ("format", "devices"),
    ("kernels.cpu", "kernels.gpu"),
    ("kernels.opencl", "kernels.cuda"),
    ("kernels",),
    ("runtime",),
    ("passes", "analysis", "profiling"),
    ("model",),
    ("importers", "api"),
    ("testing", "train", "bench", "vision"),
    ("compress", "hetero", "monitor", "batch", "compare", "radar", "dvfs"),
    ("cli", "__main__"),
)
"""The module docstring's layering, bottom first."""


def module_name(path: Path) -> str:
    """``edgecnn.kernels.cpu.conv`` for ``src/edgecnn/kernels/cpu/conv/__init__.py``-style paths."""
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str) -> bool:
    """Whether ``name`` (``edgecnn.x.y``) is a module or package in the source tree."""
    relative = Path(*name.split(".")[1:]) if "." in name else Path()
    return (SRC / relative).with_suffix(".py").is_file() or (SRC / relative / "__init__.py").is_file()


def package_of(name: str) -> str | None:
    """The package ``name`` belongs to, for edgecnn's own modules; None for anything else."""
    parts = name.split(".")
    if parts[0] != "edgecnn":
        return None
    if len(parts) == 1:
        return "edgecnn"
    if parts[1] == "kernels" and len(parts) > 2 and parts[2] in KERNEL_BACKENDS:
        return f"kernels.{parts[2]}"
    return parts[1]


def is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported_modules(path: Path) -> list[tuple[str, int]]:
    """(module, line) for every edgecnn module ``path`` imports when it runs."""
    this = module_name(path)
    is_package = path.name == "__init__.py"
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = this.split(".")
                anchor = anchor if is_package else anchor[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                target = f"{base}.{alias.name}"
                found.append((target if is_module(target) else base, node.lineno))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
    return [(name, line) for name, line in found if name.split(".")[0] == "edgecnn"]


def package_graph() -> dict[Edge, list[str]]:
    """{(package, imported package): ["file:line -> module", ...]} over the whole source tree."""
    edges: dict[Edge, list[str]] = defaultdict(list)
    for path in sorted(SRC.rglob("*.py")):
        source = package_of(module_name(path))
        assert source is not None
        for target_module, line in imported_modules(path):
            target = package_of(target_module)
            registering = source.startswith("kernels.") and target_module == REGISTRY
            if target is None or target == source or registering:
                continue
            where = f"{path.relative_to(SRC.parent)}:{line} -> {target_module}"
            if where not in edges[(source, target)]:
                edges[(source, target)].append(where)
    return edges


def strongly_connected(nodes: set[str], edges: set[Edge]) -> list[list[str]]:
    """Tarjan's strongly connected components with two or more members."""
    successors: dict[str, list[str]] = defaultdict(list)
    for a, b in edges:
        successors[a].append(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(successors[node]):
            if succ not in index:
                connect(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(nodes):
        if node not in index:
            connect(node)
    return components


def test_the_parser_sees_imports_of_every_kind() -> None:
    edges = package_graph()
    assert ("api", "model") in edges  # a module-level import
    assert ("cli", "bench") in edges  # an import inside a function
    assert ("kernels", "kernels.cpu") in edges or ("kernels.cpu", "kernels") in edges


def test_no_import_loop_between_packages() -> None:
    edges = package_graph()
    nodes = {package for edge in edges for package in edge}
    loops = strongly_connected(nodes, set(edges))
    report = []
    for component in loops:
        report.append("loop between " + ", ".join(component) + ":")
        for (a, b), places in sorted(edges.items()):
            if a in component and b in component:
                report.append(f"  {a} -> {b}: " + "; ".join(places[:3]) + (" ..." if len(places) > 3 else ""))
    assert not loops, "\n".join(report)


def test_every_import_goes_down_the_layers() -> None:
    layer = {package: rank for rank, packages in enumerate(LAYERS) for package in packages}
    edges = package_graph()
    unplaced = sorted({package for edge in edges for package in edge} - set(layer))
    assert not unplaced, f"packages missing from LAYERS: {', '.join(unplaced)}"
    upward = [
        f"  {a} (layer {layer[a] + 1}) -> {b} (layer {layer[b] + 1}): " + "; ".join(places[:3])
        for (a, b), places in sorted(edges.items())
        if layer[b] > layer[a]
    ]
    assert not upward, "imports of a higher layer:\n" + "\n".join(upward)
