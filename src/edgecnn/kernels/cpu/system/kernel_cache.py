"""numba's on-disk cache of edgecnn's kernels, invalidated by the helper modules they compile in.

numba keys a cached function on the source of the file that defines it. A kernel inlines jitted
helpers from other modules (an epilogue, fastmath's exponential, a micro-kernel), so a change to a
helper alone, by an upgrade or an edit, would leave the kernel's cached machine code stale: old
code, or wrong results where the helper's contract changed. For functions defined in edgecnn's
compiled packages, ``install`` puts locators in front of numba's own whose stamp is a digest of the
defining module and of every module of those packages it imports, directly or not. Other
functions in the process keep numba's behaviour.

The locators are found through ``numba.core.caching.CacheImpl._locator_classes`` (``_CacheImpl`` in
older versions; numba's list, not a public API); where a numba version lacks it, ``install``
leaves caching as numba does it.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import os
import threading
from pathlib import Path
from typing import Any

PACKAGE_ROOT = Path(__file__).resolve().parents[3]
"""The ``edgecnn`` package directory."""

COMPILED_PACKAGES = ("kernels", "train")
"""Subpackages of edgecnn whose modules hold compiled functions or the helpers they inline."""

_lock = threading.Lock()
_installed = False


def module_path(name: str, root: Path = PACKAGE_ROOT) -> Path | None:
    """The source file of ``edgecnn.<...>`` module ``name`` under ``root``, if it is one of the
    compiled packages' modules (a package's ``__init__.py`` for a package)."""
    parts = name.split(".")
    if parts[0] != root.name or len(parts) < 2 or parts[1] not in COMPILED_PACKAGES:
        return None
    base = root.joinpath(*parts[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _module_name(path: Path, root: Path) -> str:
    relative = path.relative_to(root.parent).with_suffix("")
    parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
    return ".".join(parts)


def imported_modules(path: Path, root: Path = PACKAGE_ROOT) -> set[Path]:
    """The compiled packages' modules that the module at ``path`` imports by name (absolute or
    relative imports; ``from a import b`` counts ``a.b`` where that is a module, else ``a``)."""
    return set(_imports(path, root, _stamp(path))[1])


def compiles(path: Path, root: Path = PACKAGE_ROOT) -> bool:
    """Whether the module at ``path`` imports numba or llvmlite (defines compiled code)."""
    return _imports(path, root, _stamp(path))[0]


def _stamp(path: Path | str) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_mtime_ns, st.st_size


@functools.cache
def _imports(path: Path, root: Path, stamp: tuple[int, int]) -> tuple[bool, frozenset[Path]]:
    # ``stamp`` (the file's mtime and size) keys the memo, as numba keys its own file hash
    tree = ast.parse(path.read_bytes(), filename=str(path))
    package = _module_name(path, root)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names.append(base)
            names.extend(f"{base}.{alias.name}" for alias in node.names)
    compiled = any(name.split(".")[0] in ("numba", "llvmlite") for name in names)
    found = (module_path(name, root) for name in names)
    return compiled, frozenset(p for p in found if p is not None and p != path)


def dependency_digest(path: Path, root: Path = PACKAGE_ROOT) -> bytes:
    """sha256 over the source of ``path`` and of every compiled-package module with compiled code
    that it imports, through such modules (each file's content, in a fixed order). A module
    without numba is neither hashed nor followed: it holds no code a kernel inlines."""
    seen: set[Path] = set()
    pending = [path.resolve()]
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        pending.extend(p for p in imported_modules(current, root) - seen if compiles(p, root))
    digest = hashlib.sha256()
    for file in sorted(seen):
        digest.update(file.relative_to(root).as_posix().encode())
        digest.update(file.read_bytes())
    return digest.digest()


@functools.cache
def _cached_digest(path: str, stamp: tuple[int, int]) -> bytes:
    # keyed by the defining file's stamp only: a helper edited while the process runs is seen
    # by the next process
    return dependency_digest(Path(path))


def _in_compiled_package(py_file: str) -> bool:
    try:
        relative = Path(py_file).resolve().relative_to(PACKAGE_ROOT)
    except ValueError:
        return False
    return len(relative.parts) > 1 and relative.parts[0] in COMPILED_PACKAGES


class _DependencyStamp:
    """Mixin for numba's source-file-backed locators: only edgecnn's compiled packages, stamped
    by ``dependency_digest``."""

    _py_file: str

    def get_source_stamp(self) -> bytes:
        return _cached_digest(self._py_file, _stamp(self._py_file))

    @classmethod
    def from_function(cls, py_func: Any, py_file: str) -> Any:
        if not _in_compiled_package(py_file):
            return None
        return super().from_function(py_func, py_file)  # type: ignore[misc]


def install() -> bool:
    """Put the dependency-stamped locators first in numba's list (idempotent, thread-safe); False
    where this numba has no such list (its own caching then applies unchanged)."""
    global _installed
    with _lock:
        if _installed:
            return True
        try:
            from numba.core import caching
        except ImportError:
            return False
        impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl", None)
        backed = getattr(caching, "_SourceFileBackedLocatorMixin", None)
        classes = getattr(impl, "_locator_classes", None)
        if impl is None or backed is None or not isinstance(classes, list):
            return False
        # the locators stamped by their plain source file (not a zip member's)
        ours = [
            type(f"Dependency{base.__name__}", (_DependencyStamp, base), {})
            for base in classes
            if isinstance(base, type) and getattr(base, "get_source_stamp", None) is backed.get_source_stamp
        ]
        impl._locator_classes = [*ours, *classes]
        _installed = True
        return True


__all__ = ["dependency_digest", "imported_modules", "install", "module_path"]
