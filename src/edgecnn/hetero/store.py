"""Saved plans: `edgecnn plan`'s profiles and decision as JSON in a per-user cache, reused next time.

A plan is keyed by the model's content hash (SHA-256 of its graph and weights), the devices considered and
the input shapes. The file repeats those fields, so a renamed, damaged or foreign file is recognised and
replaced (a warning, never a crash). Plans live in ``plans/`` under the cache directory of :mod:`edgecnn.paths`.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from edgecnn.atomic import atomic_write
from edgecnn.errors import DeviceError, EdgeCNNError
from edgecnn.hetero.partition import Partition
from edgecnn.hetero.profiles import DeviceProfile
from edgecnn.hetero.transfer import LinkCost
from edgecnn.ir.graph import Graph
from edgecnn.paths import cache_dir

FORMAT = "edgecnn-hetero-plan"
VERSION = 1


def plans_dir() -> Path:
    """Where saved plans live (not created here)."""
    return cache_dir("plans")


def model_hash(graph: Graph) -> str:
    """SHA-256 of the graph as imported: inputs, outputs, every node with its attributes, every weight's bytes."""
    digest = hashlib.sha256()

    def put(text: str) -> None:
        digest.update(text.encode())
        digest.update(b"\0")

    for spec in graph.inputs:
        put(f"input {spec.name} {spec.dtype} {spec.shape}")
    put("outputs " + ",".join(graph.outputs))
    for node in graph.nodes:
        put(f"node {node.op} {node.name} {node.inputs} {node.outputs} {node.attrs!r}")
    for name in sorted(graph.initializers):
        value = np.ascontiguousarray(graph.initializers[name])
        put(f"init {name} {value.dtype.str} {value.shape}")
        digest.update(value.tobytes())
    return digest.hexdigest()


def plan_key(model_sha256: str, devices: Sequence[str], input_shapes: Mapping[str, Sequence[int]]) -> str:
    """File stem for a (model, device set, input shapes) triple; the device order does not matter."""
    text = json.dumps(
        {
            "model": model_sha256,
            "devices": sorted(devices),
            "shapes": {k: list(v) for k, v in sorted(input_shapes.items())},
        },
        sort_keys=True,
    )
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def plan_path(model_sha256: str, devices: Sequence[str], input_shapes: Mapping[str, Sequence[int]]) -> Path:
    return plans_dir() / f"{plan_key(model_sha256, devices, input_shapes)}.json"


@dataclass(frozen=True)
class SavedPlan:
    """What `edgecnn plan` measured and decided for one model, device set and input shape."""

    model_sha256: str
    devices: tuple[str, ...]
    input_shapes: dict[str, tuple[int, ...]]
    profiles: tuple[DeviceProfile, ...]
    meters: dict[str, str]
    partition: Partition
    fine: Partition | None = None
    links: dict[str, LinkCost] = field(default_factory=dict)
    fine_estimates: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "model_sha256": self.model_sha256,
            "devices": list(self.devices),
            "input_shapes": {k: list(v) for k, v in self.input_shapes.items()},
            "profiles": [
                {"name": p.name, "seconds": p.seconds, "joules": p.energy, "estimated": p.estimated}
                for p in self.profiles
            ],
            "meters": dict(self.meters),
            "partition": self.partition.to_json(),
            "fine": None if self.fine is None else self.fine.to_json(),
            "links": {d: link.to_json() for d, link in self.links.items()},
            "fine_estimates": self.fine_estimates,
        }


class PlanFileError(EdgeCNNError, ValueError):
    """A saved plan that cannot be used: unreadable, damaged, another version or another key."""


def _field(data: Mapping[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    value = data.get(key)
    if not isinstance(value, kind):
        raise PlanFileError(f"field {key!r} is missing or not a {getattr(kind, '__name__', kind)}")
    return value


def _finite(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise PlanFileError(f"{what} must be a finite number, got {value!r}")
    return float(value)


def parse_plan(data: Any) -> SavedPlan:
    """A SavedPlan from decoded JSON; PlanFileError says what is wrong."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise PlanFileError(f"not an {FORMAT} file")
    if data.get("version") != VERSION:
        raise PlanFileError(f"plan version {data.get('version')!r}, this edgecnn writes version {VERSION}")
    try:
        profiles = tuple(
            DeviceProfile(
                str(_field(p, "name", str)),
                _finite(p.get("seconds"), "seconds"),
                joules=_finite(p.get("joules"), "joules"),
                estimated=bool(p.get("estimated", False)),
            )
            for p in _field(data, "profiles", list)
        )
        fine = data.get("fine")
        shapes = _field(data, "input_shapes", dict)
        return SavedPlan(
            model_sha256=str(_field(data, "model_sha256", str)),
            devices=tuple(str(d) for d in _field(data, "devices", list)),
            input_shapes={str(k): tuple(int(d) for d in v) for k, v in shapes.items()},
            profiles=profiles,
            meters={str(k): str(v) for k, v in _field(data, "meters", dict).items()},
            partition=Partition.from_json(data.get("partition")),
            fine=None if fine is None else Partition.from_json(fine),
            links={str(d): LinkCost.from_json(v) for d, v in dict(data.get("links") or {}).items()},
            fine_estimates=dict(data.get("fine_estimates") or {}),
        )
    except PlanFileError:
        raise
    except (EdgeCNNError, AttributeError, KeyError, TypeError, ValueError) as exc:
        raise PlanFileError(str(exc)) from None


def load_plan(
    model_sha256: str, devices: Sequence[str], input_shapes: Mapping[str, Sequence[int]]
) -> tuple[SavedPlan | None, str | None]:
    """(plan, None) when a usable saved plan exists; (None, warning) when the file is unusable; (None, None)
    when there is none."""
    path = plan_path(model_sha256, devices, input_shapes)
    if not path.exists():
        return None, None
    try:
        plan = parse_plan(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, PlanFileError) as exc:
        return None, f"saved plan {path} is unusable ({exc}); planning again"
    shapes = {k: tuple(v) for k, v in input_shapes.items()}
    if (
        plan.model_sha256 != model_sha256
        or sorted(plan.devices) != sorted(devices)
        or plan.input_shapes != shapes
    ):
        return None, f"saved plan {path} belongs to another model, device set or input shape; planning again"
    missing = set(plan.partition.devices) - set(devices)
    if plan.fine is not None:
        missing |= set(plan.fine.devices) - set(devices)
    if missing or {p.name for p in plan.profiles} - set(devices):
        return None, f"saved plan {path} names devices outside {', '.join(devices)}; planning again"
    return plan, None


def save_plan(plan: SavedPlan) -> Path:
    """Write atomically (a reader never sees half a file); returns the path."""
    path = plan_path(plan.model_sha256, plan.devices, plan.input_shapes)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(plan.to_json(), indent=2).encode()
    atomic_write(path, lambda out: out.write(text), error=DeviceError, what="device plan")
    return path
