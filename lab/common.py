"""Rewrites one marked block of a markdown document, so each benchmark table can be rerun alone."""

from __future__ import annotations

import re


def replace_section(text: str, mark: str, body: list[str]) -> str:
    """``text`` with the block between ``<!-- MARK:start -->`` and ``<!-- MARK:end -->`` replaced by
    ``body`` (appended at the end if the markers are absent)."""
    start, end = f"<!-- {mark}:start -->", f"<!-- {mark}:end -->"
    block = "\n".join([start, *body, end])
    pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.DOTALL)
    if pattern.search(text):
        return pattern.sub(lambda _: block, text)
    return text.rstrip("\n") + "\n\n" + block + "\n"
