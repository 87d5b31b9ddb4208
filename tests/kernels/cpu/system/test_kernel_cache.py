"""The kernels' numba cache is stamped by the helper modules they compile in (kernel_cache.py)."""

from __future__ import annotations

from pathlib import Path

import numba

from edgecnn.kernels.cpu.system import kernel_cache
from edgecnn.kernels.cpu.system.kernel_cache import dependency_digest, imported_modules, module_path


def _package(tmp_path: Path) -> Path:
    root = tmp_path / "edgecnn"
    cpu = root / "kernels" / "cpu"
    cpu.mkdir(parents=True)
    for package in (root, root / "kernels", cpu):
        (package / "__init__.py").write_text("")
    (cpu / "entry.py").write_text(
        "import numba\nfrom edgecnn.kernels.cpu.helper import twice\nfrom . import relative\n"
        "from edgecnn.kernels.cpu.plain import CONSTANT\nfrom edgecnn.ir import graph\n"
    )
    (cpu / "helper.py").write_text("import numba\nfrom .deep import once\n")
    (cpu / "deep.py").write_text("from numba import njit\n")
    (cpu / "relative.py").write_text("import numba\n")
    (cpu / "plain.py").write_text("from edgecnn.kernels.cpu.unrelated import x\nCONSTANT = 1\n")
    (cpu / "unrelated.py").write_text("import numba\n")
    return root


def test_imports_resolve_absolute_relative_and_from_names(tmp_path: Path) -> None:
    root = _package(tmp_path)
    cpu = root / "kernels" / "cpu"
    found = imported_modules(cpu / "entry.py", root)
    # "from . import relative" imports the package too; edgecnn.ir is not a compiled package
    assert found == {cpu / "__init__.py", cpu / "helper.py", cpu / "relative.py", cpu / "plain.py"}
    assert module_path("edgecnn.kernels.cpu", root) == cpu / "__init__.py"
    assert module_path("numpy", root) is None


def test_digest_follows_compiled_helpers_transitively(tmp_path: Path) -> None:
    root = _package(tmp_path)
    cpu = root / "kernels" / "cpu"
    entry = cpu / "entry.py"
    before = dependency_digest(entry, root)
    (cpu / "deep.py").write_text("from numba import njit\n# changed\n")
    after_deep = dependency_digest(entry, root)
    assert after_deep != before  # a helper's helper changed: the kernel is stale
    (cpu / "unrelated.py").write_text("import numba\n# changed\n")
    assert dependency_digest(entry, root) == after_deep  # only reached through a module without numba
    (cpu / "plain.py").write_text("from edgecnn.kernels.cpu.unrelated import x\nCONSTANT = 2\n")
    assert dependency_digest(entry, root) == after_deep
    assert dependency_digest(cpu / "deep.py", root) != dependency_digest(cpu / "relative.py", root)


def test_edgecnn_kernels_use_the_dependency_stamp() -> None:
    from edgecnn.kernels.cpu import fastmath
    from edgecnn.kernels.cpu.gemm import epilogue

    assert kernel_cache.install()
    locator = getattr(epilogue.activate_in_place, "_cache")._impl.locator  # noqa: B009
    assert type(locator).__name__.startswith("Dependency")
    assert locator.get_source_stamp() == dependency_digest(Path(epilogue.__file__))
    assert Path(fastmath.__file__).resolve() in imported_modules(Path(epilogue.__file__).resolve())


def test_other_functions_keep_numbas_locator(tmp_path: Path) -> None:
    kernel_cache.install()
    source = tmp_path / "user_module.py"
    source.write_text("import numba\n\n@numba.njit(cache=True)\ndef f(x):\n    return x + 1\n")
    namespace: dict[str, object] = {"__file__": str(source)}
    exec(compile(source.read_text(), str(source), "exec"), namespace)
    function = namespace["f"]
    assert isinstance(function, numba.core.registry.CPUDispatcher)
    locator = getattr(function, "_cache")._impl.locator  # noqa: B009 (a private attribute)
    assert not type(locator).__name__.startswith("Dependency")
