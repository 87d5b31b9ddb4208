"""A kernel module as it was at another git revision, imported beside this tree's, so benchmarks can
time both in one process (the only comparison this shared VM's drift allows); or, for code that
cannot share a process with this tree's, the whole package at that revision for child processes."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]


def source_at(revision: str, path: str, edit: Callable[[str], str] = lambda text: text) -> str:
    """The text of ``path`` (relative to the repository) at ``revision``, passed through ``edit``."""
    text = subprocess.run(
        ["git", "show", f"{revision}:{path}"], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout
    return edit(text)


def import_source(name: str, source: str, folder: Path) -> ModuleType:
    """``source`` imported as module ``name`` from ``folder``. The file is rewritten only when it
    changes, so numba's on-disk cache of its compiled functions stays valid between runs."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    if not path.exists() or path.read_text() != source:
        path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # numba resolves the module's globals (and imports by name) through it
    spec.loader.exec_module(module)
    return module


def package_sources(revision: str, folder: Path) -> dict[str, Path]:
    """{"before": REV's ``src`` unpacked into ``folder``, "after": this tree's ``src``}: what
    PYTHONPATH points child processes at, one version each."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", revision, "src"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return {"before": folder / "src", "after": REPO / "src"}


def run_child(source: Path, command: list[str]) -> object:
    """The JSON a child process prints last, run with the package from ``source``."""
    env = {**os.environ, "PYTHONPATH": str(source)}
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])
