"""Every case the fuzzers found (tests/fuzz_corpus/<format>/<finding>/) now ends in an EdgeCNNError
with a short message, or loads and runs.

The cases run through lab/fuzz/driver.py --check-corpus: in a child whose address space is capped
(1 GiB above its size after start-up), with a 512 MiB memory budget, so a case that still allocates without bound fails here instead of
taking the machine. Cases in code owned elsewhere stay xfail (``xfail`` in their case.json, with
the reason) until fixed; lab/notes/2026-11-28-fuzz.md lists them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "fuzz_corpus"
DRIVER = REPO / "lab" / "fuzz" / "driver.py"


def corpus_cases() -> list[Any]:
    params = []
    for record in sorted(CORPUS.glob("*/*/case.json")):
        case = json.loads(record.read_text())
        name = str(record.parent.relative_to(CORPUS))
        marks = [pytest.mark.xfail(strict=False, reason=case["xfail"])] if case.get("xfail") else []
        params.append(pytest.param(name, id=name, marks=marks))
    return params


@pytest.fixture(scope="module")
def results() -> dict[str, dict[str, Any]]:
    command = [
        sys.executable,
        str(DRIVER),
        "--check-corpus",
        "--corpus",
        str(CORPUS),
        "--timeout",
        "60",
        "--cap",
        str(1 << 30),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=True)
    outcome: dict[str, dict[str, Any]] = json.loads(done.stdout.strip().splitlines()[-1])
    return outcome


@pytest.mark.parametrize("case", corpus_cases())
def test_fuzz_case_ends_in_an_edgecnn_error(results: dict[str, dict[str, Any]], case: str) -> None:
    result = results[case]
    assert not result["finding"], f"{case}: {result}"
