"""Darknet ``.cfg`` text: ``[section]`` headers followed by ``key=value`` options.

Read as Darknet reads it: whitespace anywhere in a line is dropped, lines starting with ``#`` or
``;`` are comments, section names are matched case-insensitively (with Darknet's short aliases).
Where Darknet is lax, edgecnn chooses:
- text after a ``#`` inside a line is a comment too (Darknet would keep it in the value);
- a repeated key keeps its first value, as in Darknet, with a :class:`DarknetCfgWarning`;
- a line that is neither a header, a comment nor ``key=value`` is a ModelFormatError;
- options nobody reads are reported by :meth:`Section.warn_unused` (Darknet's "Unused field").
"""

from __future__ import annotations

import enum
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, TypeVar

from edgecnn.errors import ModelFormatError

SECTION_ALIASES = {
    "network": "net",
    "conv": "convolutional",
    "conn": "connected",
    "max": "maxpool",
    "avg": "avgpool",
    "soft": "softmax",
}
"""Darknet's alternative section names -> the names edgecnn uses."""

INT_RANGE = range(-(1 << 31), 1 << 31)
"""Darknet reads options into C ints; values outside int32 are damage, not networks."""

T = TypeVar("T")


class DarknetCfgWarning(UserWarning):
    """A cfg oddity edgecnn tolerates (repeated or unused keys)."""


class _Required(enum.Enum):
    """The default of an option that has none: the cfg must set it."""

    REQUIRED = enum.auto()


_REQUIRED: Final = _Required.REQUIRED


@dataclass
class Section:
    """One ``[kind]`` block; getters record which keys were read."""

    kind: str
    line: int
    source: str
    options: dict[str, tuple[str, int]] = field(default_factory=dict)  # key -> (value, line)
    used: set[str] = field(default_factory=set)

    def where(self, key: str | None = None) -> str:
        """``file:line: [kind], option 'key'`` for messages."""
        line = self.options[key][1] if key in self.options else self.line
        return f"{self.source}:{line}: {self.label(key)}"

    def label(self, key: str | None = None) -> str:
        """``[kind], option 'key'``: :meth:`where` without the place in the file."""
        suffix = f", option '{excerpt(key)}'" if key else ""
        return f"[{excerpt(self.kind)}]{suffix}"

    def has(self, key: str) -> bool:
        return key in self.options

    def _get(self, key: str, default: T | _Required, parse: Callable[[str], T], what: str) -> T:
        self.used.add(key)
        if key not in self.options:
            if default is _REQUIRED:
                raise ModelFormatError(f"{self.where()}: missing required option '{key}'")
            return default
        raw = self.options[key][0]
        try:
            return parse(raw)
        except (ValueError, OverflowError):
            raise ModelFormatError(f"{self.where(key)}: expected {what}, got '{excerpt(raw)}'") from None

    def get_int(self, key: str, default: int | _Required = _REQUIRED) -> int:
        return self._get(key, default, _c_int, "an integer in int32's range")

    def get_float(self, key: str, default: float | _Required = _REQUIRED) -> float:
        return self._get(key, default, _finite_float, "a number")

    def get_str(self, key: str, default: str | _Required = _REQUIRED) -> str:
        return self._get(key, default, str, "a string")

    def get_ints(self, key: str, default: tuple[int, ...] | _Required = _REQUIRED) -> tuple[int, ...]:
        return self._get(
            key, default, lambda s: tuple(_c_int(v) for v in _items(s)), "integers in int32's range"
        )

    def get_floats(self, key: str, default: tuple[float, ...] | _Required = _REQUIRED) -> tuple[float, ...]:
        return self._get(key, default, lambda s: tuple(_finite_float(v) for v in _items(s)), "numbers")

    def get_bool(self, key: str, default: bool = False) -> bool:
        """Darknet flags are integers; any non-zero value is true."""
        return self.get_int(key, int(default)) != 0

    def warn_unused(self) -> None:
        unused = [k for k in self.options if k not in self.used]
        if unused:
            warnings.warn(
                f"{self.where()}: ignoring unknown option(s) {excerpt(', '.join(unused), 200)}",
                DarknetCfgWarning,
                stacklevel=3,
            )


def excerpt(text: str, limit: int = 60) -> str:
    """``text`` cut to ``limit`` characters for a message: a damaged line can be megabytes long."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def _items(text: str) -> list[str]:
    """Comma-separated list items; a trailing comma is tolerated, as in Darknet."""
    items = text.split(",")
    if items and items[-1] == "" and len(items) > 1:
        items.pop()
    return items


def _c_int(text: str) -> int:
    value = int(text)
    if value not in INT_RANGE:
        raise ValueError(text)
    return value


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(text)
    return value


def parse_cfg(text: str, source: str = "<cfg>") -> list[Section]:
    """Split cfg text into sections; the first must be ``[net]`` (or ``[network]``)."""
    sections: list[Section] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = "".join(raw.split())
        if not line or line[0] in "#;":
            continue
        line = line.split("#", 1)[0]
        if line.startswith("["):
            if not line.endswith("]") or len(line) < 3:
                raise ModelFormatError(
                    f"{source}:{number}: malformed section header '{excerpt(raw.strip())}'"
                )
            kind = line[1:-1].lower()
            sections.append(Section(SECTION_ALIASES.get(kind, kind), number, source))
            continue
        key, sep, value = line.partition("=")
        if not sep or not key:
            raise ModelFormatError(f"{source}:{number}: expected 'key=value', got '{excerpt(raw.strip())}'")
        if not sections:
            raise ModelFormatError(f"{source}:{number}: option '{excerpt(key)}' appears before any [section]")
        section = sections[-1]
        if key in section.options:
            warnings.warn(
                f"{section.where(key)}: repeated at line {number}; keeping the first value",
                DarknetCfgWarning,
                stacklevel=2,
            )
            continue
        section.options[key] = (value, number)
    if not sections:
        raise ModelFormatError(f"{source}: no sections found; not a Darknet cfg")
    if sections[0].kind != "net":
        raise ModelFormatError(f"{sections[0].where()}: the first section must be [net] or [network]")
    return sections
