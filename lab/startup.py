"""Start-up cost: the first inference of a zoo model in a fresh Python process (import, load,
plan, compile-cache load or compilation, first run), then the steady-state run.

    python lab/startup.py [--model resnet50] [--runs 5] [--cold] [--without scipy] [--phases]
    python lab/startup.py --baseline /tmp/old/src        # interleaved with another checkout
    python lab/startup.py --write docs/startup.md      # every table of docs/startup.md

Each measurement is a separate interpreter, so numba's on-disk cache is what makes later runs
fast; ``--cold`` gives each process an empty numba cache (NUMBA_CACHE_DIR) to show the compile
cost. The model file is built (or found) by this script beforehand, and the child imports only
edgecnn: what a user's ``edgecnn.load(path)`` pays. Python's own bytecode cache is used as an
installed package would use it (PYTHONDONTWRITEBYTECODE is dropped for the child; one unmeasured
process fills both caches first), unless ``--no-bytecode``.

``--phases`` times the steps of ``edgecnn.load`` and the first run one by one: importing edgecnn,
reading the file, the graph passes, importing numba, planning (kernel choice and weight
preparation), numba's target initialisation, loading compiled kernels from its cache, and the
first run's remaining work."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

RESULT = "STARTUP-RESULT "

THIS_SRC: Path | None = None
"""The src folder "this tree" runs from (``--src``); None: whichever edgecnn Python finds."""

WHOLE = """
import json, sys, time
for name in {blocked!r}:
    sys.modules[name] = None  # as if not installed: importing it raises ImportError
t0 = time.perf_counter()
import numpy as np
import edgecnn
t1 = time.perf_counter()
model = edgecnn.load({path!r})
spec = model.inputs[0]
x = np.random.default_rng(0).standard_normal([1, *spec.shape[1:]]).astype(np.float32)
t2 = time.perf_counter()
model(x)
t3 = time.perf_counter()
model(x)
t4 = time.perf_counter()
print({marker!r} + json.dumps({{"import": t1 - t0, "load": t2 - t1, "first_run": t3 - t2,
                  "second_run": t4 - t3, "total": t3 - t0}}))
"""

PHASES = """
import json, sys, time
for name in {blocked!r}:
    sys.modules[name] = None
marks = [time.perf_counter()]
import numpy as np
import edgecnn.api
marks.append(time.perf_counter())
from edgecnn.importers import load_graph
graph = load_graph({path!r})
marks.append(time.perf_counter())
from edgecnn.model import Model
from edgecnn.runtime.options import RuntimeOptions
model = Model(graph, RuntimeOptions.resolve())
x = np.random.default_rng(0).standard_normal([1, *model.inputs[0].shape[1:]]).astype(np.float32)
marks.append(time.perf_counter())
import numba
import numba.core.base
import numba.core.dispatcher
marks.append(time.perf_counter())
model.plan_for(x)
marks.append(time.perf_counter())
spent = {{"target": 0.0, "cache": 0.0}}
kernels = []
refresh = numba.core.base.BaseContext.refresh
compile_for_args = numba.core.dispatcher.Dispatcher._compile_for_args

def timed_refresh(self):
    start = time.perf_counter()
    refresh(self)
    spent["target"] += time.perf_counter() - start

def timed_compile(self, *args, **kwargs):
    start = time.perf_counter()
    try:
        return compile_for_args(self, *args, **kwargs)
    finally:
        spent["cache"] += time.perf_counter() - start
        kernels.append(self.py_func.__module__ + "." + self.py_func.__name__)

numba.core.base.BaseContext.refresh = timed_refresh
numba.core.dispatcher.Dispatcher._compile_for_args = timed_compile
model(x)
marks.append(time.perf_counter())
model(x)
marks.append(time.perf_counter())
d = [b - a for a, b in zip(marks, marks[1:])]
print({marker!r} + json.dumps({{
    "import edgecnn": d[0], "read file": d[1], "passes": d[2], "import numba": d[3], "plan": d[4],
    "numba target init": spent["target"], "kernel cache loads": spent["cache"] - spent["target"],
    "first run, rest": d[5] - spent["cache"], "second run": d[6], "total": sum(d[:6]),
    "kernels": kernels,
    "kernel modules": sorted(m for m in sys.modules if m.startswith("edgecnn.kernels.cpu.")),
    "scipy": "scipy" in sys.modules, "onnx": "onnx" in sys.modules}}))
"""

WHOLE_COLUMNS = ("import", "load", "first_run", "second_run", "total")
PHASE_COLUMNS = (
    "import edgecnn",
    "read file",
    "passes",
    "import numba",
    "plan",
    "numba target init",
    "kernel cache loads",
    "first run, rest",
    "total",
    "second run",
)


def child_env(cold: bool, bytecode: bool, src: Path | None = None) -> dict[str, str]:
    """The child's environment; ``src``: import edgecnn from that source tree instead of this one."""
    env = dict(os.environ)
    if bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    if cold:
        env["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="edgecnn-cold-cache-")
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(src), *filter(None, [env.get("PYTHONPATH")])])
    return env


def run_child(source: str, env: dict[str, str]) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise SystemExit(f"child process failed:\n{out.stderr[-3000:]}")
    line = next(ln for ln in reversed(out.stdout.splitlines()) if ln.startswith(RESULT))
    return json.loads(line[len(RESULT) :])


Variant = tuple["Path | None", tuple[str, ...]]
"""What one row runs: the src folder (None: this tree) and the packages hidden from it."""


def measure(
    path: Path,
    runs: int,
    *,
    phases: bool,
    cold: bool,
    bytecode: bool,
    variants: dict[str, Variant],
) -> dict[str, list[dict[str, object]]]:
    """``runs`` fresh processes per variant (label -> (src folder, packages hidden)), alternating
    between variants so that all see the same load, after one unmeasured warm-up process each
    unless cold."""
    template = PHASES if phases else WHOLE
    sources = {
        label: (src or THIS_SRC, template.format(path=str(path), blocked=blocked, marker=RESULT))
        for label, (src, blocked) in variants.items()
    }
    if not cold:
        for src, source in sources.values():
            run_child(source, child_env(False, bytecode, src))  # fills numba's and Python's caches
    results: dict[str, list[dict[str, object]]] = {label: [] for label in variants}
    columns = PHASE_COLUMNS if phases else WHOLE_COLUMNS
    order = list(sources.items())
    for run in range(runs):
        for label, (src, source) in order[run % len(order) :] + order[: run % len(order)]:
            result = run_child(source, child_env(cold, bytecode, src))
            result["load average"] = os.getloadavg()[0]
            results[label].append(result)
            print(
                f"{label + ': ' if label else ''}process {run + 1}: "
                + ", ".join(f"{k} {float(result[k]) * 1e3:.0f} ms" for k in columns)  # type: ignore[arg-type]
                + f" (load average {result['load average']:.2f})",
                flush=True,
            )
    return results


def _ms(values: list[float]) -> str:
    """min / median in milliseconds (the minimum is the least disturbed by other processes)."""
    if len(values) == 1:
        return f"{values[0] * 1e3:.0f}"
    return f"{min(values) * 1e3:.0f} / {statistics.median(values) * 1e3:.0f}"


def table(rows: list[tuple[str, list[dict[str, object]]]], columns: tuple[str, ...]) -> str:
    lines = [
        "| | " + " | ".join(columns) + " | load avg |",
        "| --- |" + " ---: |" * (len(columns) + 1),
    ]
    for label, results in rows:
        cells = [_ms([float(r[c]) for r in results]) for c in columns]  # type: ignore[arg-type]
        loads = [float(r["load average"]) for r in results]  # type: ignore[arg-type]
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {min(loads):.2f}–{max(loads):.2f} |")
    return "\n".join(lines)


def machine_line() -> str:
    from edgecnn.bench.machine import blas_library, cpu_model

    return (
        f"{cpu_model()}, {os.cpu_count()} logical CPUs; Python {sys.version.split()[0]}; {blas_library()}; "
        f"load average before the run {', '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )


def write_page(
    output: Path,
    model: str,
    path: Path,
    runs: int,
    bytecode: bool,
    baseline: Path | None,
    baseline_label: str = "",
) -> None:
    """All measurements of docs/startup.md, and the page around them."""
    machine = machine_line()
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    warm_label = "warm compile cache"
    no_scipy_label = "warm, as if SciPy were absent (`--without scipy`)"
    variants: dict[str, Variant] = {warm_label: (None, ()), no_scipy_label: (None, ("scipy",))}
    if baseline is not None:
        variants[f"warm, baseline: {baseline_label or baseline}"] = (baseline, ())
    print("warm rows, interleaved", flush=True)
    rows = measure(path, runs, phases=False, cold=False, bytecode=bytecode, variants=variants)
    print("phases", flush=True)
    phases = measure(path, runs, phases=True, cold=False, bytecode=bytecode, variants={"": (None, ())})[""]
    print("cold", flush=True)
    rows["cold: empty numba cache (`--cold`)"] = measure(
        path, 1, phases=False, cold=True, bytecode=bytecode, variants={"": (None, ())}
    )[""]
    sample = phases[0]
    snapshot = (
        ""
        if THIS_SRC is None
        else f" edgecnn ran from `{THIS_SRC}`, a snapshot of the checkout (`git archive HEAD src`), so"
        " that kernels edited in the working tree meanwhile could not make numba recompile mid-run."
    )
    kernels = list(dict.fromkeys(str(k).rsplit(".", 1)[-1] for k in sample["kernels"]))  # type: ignore[attr-defined]
    command_tail = "" if THIS_SRC is None else f" --src {THIS_SRC}"
    command_tail += "" if baseline is None else f" --baseline {baseline}"
    if baseline is not None and baseline_label:
        command_tail += f" --baseline-label '{baseline_label}'"
    totals = [float(r["total"]) for r in rows[warm_label]]  # type: ignore[arg-type]
    verdict = "met" if statistics.median(totals) < 1.5 else "**not met**"
    first_table = table(list(rows.items()), WHOLE_COLUMNS)
    baseline_note = (
        ""
        if baseline is None
        else " The baseline row runs edgecnn from another checkout's `src` folder (`--baseline SRC`, made"
        " with `git archive COMMIT src | tar -x -C /tmp/startup-base`)."
    )
    phase_table = table([("warm compile cache", phases)], PHASE_COLUMNS)
    text = f"""# Start-up time

Issue 4's target: the first inference of ResNet-50 in a fresh process with a warm compile cache
takes under 1.5 s; the cold first run is reported. Measured by

    python lab/startup.py --model {model} --runs {runs} --write docs/startup.md{command_tail}

on {machine}; {started}. Each row is {runs} fresh processes (1 for the cold row) after one
unmeasured process that fills the caches; cells are min / median in ms (the minimum is the run
least disturbed by other work on the machine). ResNet-50 from the benchmark zoo, batch 1, default
threads; the child process imports only numpy and edgecnn and calls `edgecnn.load(path)`, then
`model(x)` twice.{snapshot}

## First inference

{first_table}

`import`: numpy and edgecnn; `load`: `edgecnn.load` (read the file, graph passes); `first_run`:
planning (kernel choice, weight preparation) and the first run; `total`: all three. The warm rows'
processes alternate, so they saw the same load.{baseline_note} The target is {verdict} (median of
the first row, on this machine at this load).

## Where the time goes (`--phases`)

{phase_table}

The same steps called one by one: `import edgecnn` (numpy, edgecnn.api); `read file` (the ONNX
importer: the file decoded, its weights copied once); `passes` (the optimisation pipeline in `Model`); `import
numba`; `plan` (the kernel package imported, and with it numba's numpy implementations, see
`kernels/cpu/system/numba_start.py`; kernel modules for the model's ops imported, kernels chosen, weights
prepared: Winograd transforms, packing, the repeated-filter and sparsity checks); `numba target
init` (the rest of numba's one-time typing and lowering registries);
`kernel cache loads` (the compiled kernels the model uses, from numba's on-disk cache); `first
run, rest` (the run itself and the thread pool's start).

Compiled kernels loaded for this model: {", ".join(kernels)}
(kernel modules imported: {", ".join(str(m).rsplit(".", 1)[-1] for m in sample["kernel modules"])}).
SciPy imported: {sample["scipy"]}; onnx imported: {sample["onnx"]}.
"""
    output.write_text(text + NOTES, encoding="utf-8")
    print(f"wrote {output}")


NOTES = """
## What start-up costs, and what was done about it

- ONNX files are decoded straight from protobuf's wire format (`importers/onnx/wire.py`): the weights
  are copied once, from the memory-mapped file into their arrays, and neither onnx nor protobuf is
  imported. Through the onnx package the file was copied three times (into a bytes object, into
  protobuf's messages, out of each tensor's `raw_data`) after onnx's own import. Files with external
  or sparse weights, subgraphs, opsets before 7 and anything damaged still go through onnx, which
  also writes the error messages.
- Kernel modules are imported per operator (`KERNEL_MODULES` in `edgecnn/kernels/cpu/__init__.py`):
  a model without LRN or int8 layers never imports those kernels, and only the compiled functions a
  plan calls are loaded from numba's cache (numba loads a dispatcher's code at its first call).
- Plans are built with BLAS on one thread (`runtime/plan.py`): the weight transforms' GEMMs are short
  and skinny; on a quiet machine OpenBLAS's second thread hardly shortens them, and whenever another
  process holds the other core, waking it for each GEMM makes them much slower.
- The repeated-filter check (`kernels/cpu/rowstable.py`) keys each row on four blocks of adjacent
  columns instead of sixteen scattered ones (fewer cache lines per row).
- numba's own start imports SciPy's `scipy.linalg` (when SciPy is installed) only to learn whether
  `np.correlate` may use BLAS; SciPy's imports then pull in much of numpy's lazily loaded code, about
  270 ms in all. `kernels/cpu/system/numba_start.py` imports that numba module with SciPy's BLAS bindings
  hidden and sets its flag to what the check would have found, so nothing changes for other numba
  code in the process (`np.dot` in a compiled function still imports them when it is compiled).
  `startup.py --baseline` with the commit before as the baseline: 1365 against 1550 ms median, 1225
  against 1439 ms minimum (load about 0.9).
- The sparse kernels' rule (is a layer's weight below the density where CSR pays?) counts non-zeros
  chunk by chunk and stops once the answer is settled (`sparse_csr.sparser_than`): a dense layer is
  rejected after a tenth of its weights instead of all of them (ResNet-50 has 23 M).
- The benchmark itself no longer counts the import of `edgecnn.bench.zoo` (which imports onnx to
  build models) inside the timed process, and uses Python's bytecode cache as an installed package
  does (`--no-bytecode` measures without it).

What remains is mostly fixed cost: importing numpy and numba, numba's target initialisation and
its numpy implementations, loading each compiled kernel from the cache (numba parses its LLVM
bitcode again), the graph passes (BatchNorm folding rewrites every conv weight), and the Winograd
filter transforms when the plan is built. The `--without scipy` row shows a process without SciPy;
edgecnn does not depend on it.

The compiled CPU kernels are cached on disk by numba (`cache=True`), so only the first process after
installing (or after changing a kernel) pays the compilation (the cold row), and logs one line on
stderr saying so (`kernels/cpu/system/compile_notice.py`); later processes load the cache.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--cold", action="store_true", help="Start each process with an empty numba cache (NUMBA_CACHE_DIR)."
    )
    parser.add_argument(
        "--without",
        action="append",
        default=[],
        metavar="PACKAGE",
        help="Run as if PACKAGE were not installed (e.g. scipy, which numba imports at start when present).",
    )
    parser.add_argument("--phases", action="store_true", help="Time each start-up step separately.")
    parser.add_argument(
        "--no-bytecode", action="store_true", help="Keep PYTHONDONTWRITEBYTECODE if set (no .pyc cache)."
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="SRC",
        help="Also run edgecnn from this src folder (e.g. of a `git worktree` at an older commit), "
        "processes alternating with this tree's.",
    )
    parser.add_argument(
        "--src",
        type=Path,
        metavar="SRC",
        help="Run edgecnn from this src folder (a snapshot: kernels edited while the benchmark runs would "
        "make numba recompile them mid-measurement).",
    )
    parser.add_argument("--baseline-label", default="", help="What the baseline is, for the page.")
    parser.add_argument("--write", type=Path, metavar="PAGE", help="Run every measurement; write the page.")
    args = parser.parse_args()
    global THIS_SRC
    THIS_SRC = args.src.resolve() if args.src else None
    from edgecnn.bench.zoo import model_path

    path = model_path(args.model, Path.home() / ".cache" / "edgecnn" / "bench")
    if args.write:
        baseline = args.baseline.resolve() if args.baseline else None
        write_page(
            args.write, args.model, path, args.runs, not args.no_bytecode, baseline, args.baseline_label
        )
        return
    variants: dict[str, Variant] = {"this tree": (None, tuple(args.without))}
    if args.baseline:
        variants["baseline"] = (args.baseline.resolve(), tuple(args.without))
    results = measure(
        path, args.runs, phases=args.phases, cold=args.cold, bytecode=not args.no_bytecode, variants=variants
    )
    columns = PHASE_COLUMNS if args.phases else WHOLE_COLUMNS
    print(f"min / median over {args.runs} processes each, ms")
    print(table(list(results.items()), columns))


if __name__ == "__main__":
    main()
