"""Shared by the sparse benchmarks: replace one marked section of docs/compression.md (keeping the
rest of the page), and the machine line every table carries."""

from __future__ import annotations

import os
import platform
from pathlib import Path

import numba
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
COMPRESSION_DOC = ROOT / "docs" / "compression.md"


def machine_line(threads: int) -> str:
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    cpu = platform.processor() or platform.machine()
    for line in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []:
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    return (
        f"Machine: {cpu}, {os.cpu_count()} cores visible, {threads} threads; Python "
        f"{platform.python_version()}, numpy {np.__version__}, numba {numba.__version__}; "
        f"load average at the end: {load} (well above 0: other work shared the cores)."
    )


def replace_section(key: str, body: str, doc: Path = COMPRESSION_DOC, before: str | None = None) -> None:
    """Put ``body`` between ``<!-- key:begin -->`` and ``<!-- key:end -->`` in ``doc``; if the markers
    are absent, insert the block before the heading line ``before`` (or append it)."""
    begin, end = f"<!-- {key}:begin -->", f"<!-- {key}:end -->"
    block = f"{begin}\n{body.rstrip()}\n{end}"
    text = doc.read_text()
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        text = head + block + tail
    elif before is not None and f"\n{before}\n" in text:
        head, tail = text.split(f"\n{before}\n", 1)
        text = f"{head}\n{block}\n\n{before}\n{tail}"
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    doc.write_text(text)
