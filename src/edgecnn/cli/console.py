"""Shared terminal output: consoles and human-readable numbers."""

from __future__ import annotations

from rich.console import Console

console = Console(highlight=False, soft_wrap=True)
error_console = Console(stderr=True, highlight=False, soft_wrap=True)


def human_count(n: float) -> str:
    """1234567 -> '1.23M' (parameters, MACs)."""
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.2f}{unit}"
    return f"{n:.0f}"


def human_bytes(n: float) -> str:
    """1536 -> '1.5 KiB'."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"
