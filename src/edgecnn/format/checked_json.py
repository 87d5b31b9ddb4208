"""Typed access to the parsed GRAPH JSON: every wrong kind or missing key is an EcnnFormatError
that names its JSON path (``GRAPH.nodes[3].inputs``), never a KeyError or TypeError."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

from edgecnn.format.errors import EcnnFormatError

_KIND = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "an integer"}


def kind_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, float):
        return "a number"
    return _KIND.get(type(value), type(value).__name__)


class CheckedJson:
    """Checks on values of one file's GRAPH document; ``where`` is a JSON path inside it."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, what: str, where: str) -> NoReturn:
        raise EcnnFormatError(self.source, what, where)

    def expect(self, value: Any, kind: type, where: str) -> Any:
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            self.fail(f"expected {_KIND[kind]}, got {kind_of(value)}", where)
        return value

    def member(self, obj: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
        if key not in obj:
            self.fail(f"missing key '{key}'", where)
        return self.expect(obj[key], kind, f"{where}.{key}")

    def optional(self, obj: dict[str, Any], key: str, kind: type, where: str, default: Any) -> Any:
        return default if key not in obj else self.expect(obj[key], kind, f"{where}.{key}")

    def integer(self, value: Any, where: str, low: int, high: int) -> int:
        number = self.expect(value, int, where)
        if not low <= number <= high:
            self.fail(f"{number} is outside {low}..{high}", where)
        return number

    def strings(self, value: Any, where: str) -> list[str]:
        items = self.expect(value, list, where)
        return [self.expect(item, str, f"{where}[{i}]") for i, item in enumerate(items)]

    def string_map(self, value: Any, where: str) -> dict[str, str]:
        items = self.expect(value, dict, where)
        return {key: self.expect(item, str, f"{where}.{key}") for key, item in items.items()}
