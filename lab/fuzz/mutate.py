"""Mutation primitives the format targets share: interesting values, byte edits, and edits of one
field in a JSON tree or a protobuf message (found by reflection, so every field of every message
type is reachable without a list per format)."""

from __future__ import annotations

import contextlib
import math
import random
import struct
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

INTERESTING_INTS = (
    0, 1, -1, 2, 3, 7, 64, 255, 256, 1000, 65535, 1 << 20, 1 << 24, 1_000_000_000,
    (1 << 31) - 1, 1 << 31, -(1 << 31), (1 << 32) - 1, 1 << 32, 1 << 40, (1 << 62), (1 << 63) - 1, -(1 << 63),
)  # fmt: skip
INTERESTING_FLOATS = (0.0, -0.0, 1.0, -1.0, 0.5, 1e-30, 1e30, 3.4e38, -3.4e38, math.inf, -math.inf, math.nan)


def interesting_int(rng: random.Random, current: int = 0) -> int:
    """An edge value, a near neighbour of ``current``, or ``current`` scaled up."""
    choice = rng.random()
    if choice < 0.6:
        return rng.choice(INTERESTING_INTS)
    if choice < 0.8:
        return current + rng.choice((-2, -1, 1, 2))
    return current * rng.choice((-1, 10, 1000, 1 << 20)) + rng.randint(-1, 1)


def interesting_float(rng: random.Random, current: float = 0.0) -> float:
    if rng.random() < 0.7:
        return rng.choice(INTERESTING_FLOATS)
    return current * rng.choice((-1.0, 1e-6, 1e6, 1e30)) if math.isfinite(current) else 1.0


def junk_text(rng: random.Random) -> str:
    pool = ("", "x", "\x1b[2J", "\x00", "a" * rng.randint(1, 5000), "é", "-1", "1e20", "nan", "[", "{", "0,0")
    return rng.choice(pool)


def clamp(value: int, bits: int, signed: bool) -> int:
    """``value`` wrapped into an integer field of ``bits`` bits."""
    value &= (1 << bits) - 1
    if signed and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


# ----------------------------------------------------------------------------------------- bytes
def mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    """One blind edit: flip, overwrite with an interesting word, insert, delete, truncate, extend."""
    buffer = bytearray(data)
    kind = rng.randrange(7)
    position = rng.randrange(len(buffer)) if buffer else 0
    if kind == 0 and buffer:
        buffer[position] ^= 1 << rng.randrange(8)
    elif kind == 1 and len(buffer) >= 4:
        position = min(position, len(buffer) - 4)
        value = clamp(interesting_int(rng), 32, signed=True)
        buffer[position : position + 4] = struct.pack("<i", value)
    elif kind == 2:
        buffer[position:position] = rng.randbytes(rng.randint(1, 16))
    elif kind == 3 and buffer:
        del buffer[position : position + rng.randint(1, 64)]
    elif kind == 4:
        del buffer[position:]
    elif kind == 5:
        buffer += rng.randbytes(rng.randint(1, 64))
    elif buffer:
        buffer[position] = rng.randrange(256)
    return bytes(buffer)


# ------------------------------------------------------------------------------------------ JSON
def json_paths(tree: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path (keys and indices) to a value in a JSON tree, the root excluded."""
    paths: list[tuple[Any, ...]] = []
    items = tree.items() if isinstance(tree, dict) else enumerate(tree) if isinstance(tree, list) else ()
    for key, value in items:
        paths.append((*prefix, key))
        paths.extend(json_paths(value, (*prefix, key)))
    return paths


def json_value(rng: random.Random, current: Any) -> Any:
    """A replacement for ``current``: mostly of its own type, sometimes of another."""
    if rng.random() < 0.15:
        return rng.choice((None, True, "", "x", [], {}, -1, 1 << 62, 1e308, [1 << 40], {"float": "nan"}))
    if isinstance(current, bool):
        return not current
    if isinstance(current, int):
        return interesting_int(rng, current)
    if isinstance(current, float):
        value = interesting_float(rng, current)
        return value if math.isfinite(value) else 1e308
    if isinstance(current, str):
        return junk_text(rng)
    if isinstance(current, list):
        if current and rng.random() < 0.5:
            return current[: rng.randrange(len(current))]
        return [*current, *(current[-1:] * rng.choice((1, 2, 100)))] if current else [0]
    return current


def mutate_json(tree: Any, rng: random.Random) -> None:
    """Replace, delete or duplicate one value somewhere in ``tree`` (in place)."""
    paths = json_paths(tree)
    if not paths:
        return
    path = rng.choice(paths)
    parent = tree
    for key in path[:-1]:
        parent = parent[key]
    key = path[-1]
    action = rng.random()
    if action < 0.1 and isinstance(parent, (dict, list)):
        del parent[key]
    elif action < 0.2 and isinstance(parent, list):
        parent.insert(key, parent[key])
    else:
        parent[key] = json_value(rng, parent[key])


# -------------------------------------------------------------------------------------- protobuf
INT_FIELD_BITS = {
    FieldDescriptor.TYPE_INT32: (32, True), FieldDescriptor.TYPE_SINT32: (32, True),
    FieldDescriptor.TYPE_SFIXED32: (32, True), FieldDescriptor.TYPE_UINT32: (32, False),
    FieldDescriptor.TYPE_FIXED32: (32, False), FieldDescriptor.TYPE_INT64: (64, True),
    FieldDescriptor.TYPE_SINT64: (64, True), FieldDescriptor.TYPE_SFIXED64: (64, True),
    FieldDescriptor.TYPE_UINT64: (64, False), FieldDescriptor.TYPE_FIXED64: (64, False),
    FieldDescriptor.TYPE_ENUM: (32, True),
}  # fmt: skip
FLOAT_TYPES = (FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_DOUBLE)


def message_fields(message: Message) -> list[tuple[Message, FieldDescriptor]]:
    """Every (message, scalar field) pair that is set somewhere under ``message``, plus the unset
    fields of messages that are present (so a mutation can add a field the seed did not use)."""
    found: list[tuple[Message, FieldDescriptor]] = []
    for field in message.DESCRIPTOR.fields:
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            children = getattr(message, field.name)
            if field.is_repeated:
                for child in children:
                    found.extend(message_fields(child))
            elif message.HasField(field.name):
                found.extend(message_fields(children))
        else:
            found.append((message, field))
    return found


def scalar_value(rng: random.Random, field: FieldDescriptor, current: Any) -> Any:
    """A new value of the field's type (within the field's integer width)."""
    if field.type == FieldDescriptor.TYPE_ENUM and rng.random() < 0.8:
        return rng.choice([value.number for value in field.enum_type.values])
    if field.type in INT_FIELD_BITS:
        bits, signed = INT_FIELD_BITS[field.type]
        return clamp(interesting_int(rng, int(current or 0)), bits, signed)
    if field.type in FLOAT_TYPES:
        return interesting_float(rng, float(current or 0.0))
    if field.type == FieldDescriptor.TYPE_BOOL:
        return not current
    if field.type == FieldDescriptor.TYPE_BYTES:
        data = bytes(current or b"")
        return mutate_bytes(data, rng) if data and rng.random() < 0.7 else rng.randbytes(rng.randint(0, 64))
    return junk_text(rng)


def mutate_message(message: Message, rng: random.Random, names: list[str] | None = None) -> None:
    """Edit one scalar field somewhere under ``message`` (in place): a new value, or for repeated
    fields an element changed, removed, or appended many times. String fields take one of ``names``
    (the tensor or blob names the file uses) half the time, so edits rewire graphs, not only break them."""
    fields = message_fields(message)
    if not fields:
        return
    owner, field = rng.choice(fields)
    if field.type == FieldDescriptor.TYPE_STRING and names and rng.random() < 0.5:
        value: Any = rng.choice(names)
    else:
        value = None
    with contextlib.suppress(ValueError):  # a closed (proto2) enum refuses numbers it does not define
        _set_field(owner, field, value, rng)


def _set_field(owner: Message, field: FieldDescriptor, value: Any, rng: random.Random) -> None:
    if field.is_repeated:
        items = getattr(owner, field.name)
        action = rng.random()
        if items and action < 0.3:
            del items[rng.randrange(len(items))]
        elif items and action < 0.7:
            index = rng.randrange(len(items))
            items[index] = value if value is not None else scalar_value(rng, field, items[index])
        else:
            new = value if value is not None else scalar_value(rng, field, items[-1] if items else None)
            items.extend([new] * rng.choice((1, 1, 2, 1000)))
        return
    current = getattr(owner, field.name)
    setattr(owner, field.name, value if value is not None else scalar_value(rng, field, current))


def mutate_repeated_message(message: Message, rng: random.Random) -> None:
    """Delete, duplicate or swap one element of a repeated message field somewhere under ``message``."""
    lists = [
        getattr(owner, f.name)
        for owner in _messages(message)
        for f in owner.DESCRIPTOR.fields
        if f.type == FieldDescriptor.TYPE_MESSAGE and f.is_repeated
    ]
    lists = [items for items in lists if len(items)]
    if not lists:
        return
    items = rng.choice(lists)
    index = rng.randrange(len(items))
    action = rng.randrange(3)
    if action == 0:
        del items[index]
    elif action == 1:
        items.add().CopyFrom(items[index])
    elif len(items) > 1:
        other = rng.randrange(len(items))
        first, second = type(items[index])(), type(items[other])()
        first.CopyFrom(items[index])
        second.CopyFrom(items[other])
        items[index].CopyFrom(second)
        items[other].CopyFrom(first)


def _messages(message: Message) -> list[Message]:
    """``message`` and every message under it."""
    found = [message]
    for field in message.DESCRIPTOR.fields:
        if field.type != FieldDescriptor.TYPE_MESSAGE:
            continue
        value = getattr(message, field.name)
        if field.is_repeated:
            for child in value:
                found.extend(_messages(child))
        elif message.HasField(field.name):
            found.extend(_messages(value))
    return found


def mutate_lines(text: str, rng: random.Random, fragments: tuple[str, ...]) -> str:
    """A line deleted, duplicated, swapped with another, or one of ``fragments`` inserted."""
    lines = text.splitlines()
    if not lines:
        return rng.choice(fragments)
    index = rng.randrange(len(lines))
    action = rng.randrange(4)
    if action == 0:
        del lines[index]
    elif action == 1:
        lines.insert(index, lines[index])
    elif action == 2:
        other = rng.randrange(len(lines))
        lines[index], lines[other] = lines[other], lines[index]
    else:
        lines.insert(index, rng.choice(fragments))
    return "\n".join(lines) + "\n"
