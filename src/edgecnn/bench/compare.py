"""`edgecnn bench --compare FILE.json`: an earlier run's edgecnn / onnxruntime ratios beside this
run's, case by case, with the change. Ratios rather than milliseconds: both engines run in the same
rounds, so a ratio carries less of the machine's load than a latency does."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from edgecnn.bench.report import ratio_summary
from edgecnn.bench.runner import BenchResult
from edgecnn.errors import InputError


def load_result(path: Path) -> BenchResult:
    """A bench JSON (what --json prints, or the sidecar of --output); InputError when it is not one."""
    try:
        data = json.loads(path.read_text())
        return BenchResult.from_dict(data)
    except OSError as exc:
        raise InputError(f"--compare {path}: cannot read it ({exc.strerror or exc})") from None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InputError(
            f"--compare {path}: not an `edgecnn bench` JSON result ({type(exc).__name__}: {exc})"
        ) from None


def _change(before: float | None, now: float | None) -> float | None:
    return now / before if before and now else None


def _geomean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


MACHINE_KEYS = ("cpu", "isa", "caches", "usable_cpus")
"""What must match for two runs to count as the same machine (a model name such as "AMD EPYC"
covers CPUs with and without AVX-512)."""


def same_machine(before: dict[str, object], now: dict[str, object]) -> bool:
    """Whether the two runs' machine descriptions agree on MACHINE_KEYS; a key an older run did not
    record counts as a difference, since it cannot be checked."""
    return all(key in before and before.get(key) == now.get(key) for key in MACHINE_KEYS)


def comparison(result: BenchResult, previous: BenchResult, source: Path) -> dict[str, Any]:
    """JSON-able: per (model, batch) of this run, the earlier ratio ("before", None where that run
    lacks the case), this run's ("now") and now / before ("change", < 1: edgecnn gained on
    onnxruntime); per batch, the geometric means over the cases both runs have."""
    before = ratio_summary(previous)
    rows: list[dict[str, Any]] = []
    geomeans: dict[str, dict[str, float | None]] = {}
    for batch, (ratios, _) in ratio_summary(result).items():
        earlier = before.get(batch, ({}, 0.0))[0]
        for model, now in ratios.items():
            old = earlier.get(model)
            rows.append(
                {"model": model, "batch": batch, "before": old, "now": now, "change": _change(old, now)}
            )
        shared = [m for m in ratios if m in earlier]
        old_mean, new_mean = _geomean([earlier[m] for m in shared]), _geomean([ratios[m] for m in shared])
        geomeans[str(batch)] = {"before": old_mean, "now": new_mean, "change": _change(old_mean, new_mean)}
    return {
        "file": str(source),
        "date": previous.date,
        "cpu": previous.machine.get("cpu"),
        "isa": previous.machine.get("isa"),
        "same_cpu": same_machine(previous.machine, result.machine),
        "rows": rows,
        "geometric_means": geomeans,
    }
