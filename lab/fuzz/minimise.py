"""Delta debugging of a failing case: drop chunks of each file (lines of a text file, byte runs of a
binary one) while the failure keeps its signature, so a corpus entry holds only what triggers it."""

from __future__ import annotations

from collections.abc import Callable

Case = dict[str, bytes]
TEXT_SUFFIXES = (".cfg", ".prototxt")


def _split(name: str, data: bytes) -> list[bytes]:
    if name.endswith(TEXT_SUFFIXES):
        return data.splitlines(keepends=True)
    return [data[i : i + 1] for i in range(len(data))] if len(data) <= 256 else _runs(data, 64)


def _runs(data: bytes, count: int) -> list[bytes]:
    size = max(1, len(data) // count)
    return [data[i : i + size] for i in range(0, len(data), size)]


def minimise(case: Case, still_fails: Callable[[Case], bool], attempts: int = 300) -> Case:
    """The smallest case found within ``attempts`` runs for which ``still_fails`` holds."""
    best = dict(case)
    budget = attempts
    for name in sorted(case):
        units = _split(name, best[name])
        granularity = 2
        while len(units) >= 2 and budget > 0:
            chunk = max(1, len(units) // granularity)
            reduced = False
            for start in range(0, len(units), chunk):
                if budget <= 0:
                    break
                candidate_units = units[:start] + units[start + chunk :]
                candidate = {**best, name: b"".join(candidate_units)}
                budget -= 1
                if still_fails(candidate):
                    units, best = candidate_units, candidate
                    granularity = max(granularity - 1, 2)
                    reduced = True
                    break
            if not reduced:
                if chunk == 1:
                    break
                granularity = min(len(units), granularity * 2)
    return best
