"""The plans a Model keeps: least recently used first out, bounded by count and by bytes.

A server that meets a new batch size or image size on every call would otherwise keep a plan (its
prepared weights, its arenas) per shape for ever; the byte bound keeps the plans of a large model
within its memory limit however few of them there are.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterator, ValuesView

from edgecnn.runtime.plan import Plan, plan_bytes

MAX_PLANS = 8
"""Plans kept per model: a few batch sizes or resolutions plus debugging requests for intermediate
tensors, which is what a deployment meets."""


class PlanCache:
    """An LRU of plans holding at most ``max_plans`` plans and ``max_bytes`` bytes (``plan_bytes``);
    the newest plan is always kept. Not thread-safe: Model holds its lock around every call."""

    def __init__(self, max_bytes: int, max_plans: int = MAX_PLANS) -> None:
        self.max_bytes = max_bytes
        self.max_plans = max_plans
        self._plans: OrderedDict[Hashable, tuple[Plan, int]] = OrderedDict()
        self.nbytes = 0

    def get(self, key: Hashable) -> Plan | None:
        """The plan under ``key``, marked most recently used, or None."""
        entry = self._plans.get(key)
        if entry is None:
            return None
        self._plans.move_to_end(key)
        return entry[0]

    def put(self, key: Hashable, plan: Plan) -> None:
        """Keep ``plan`` as the most recently used; drop the least recently used ones beyond the bounds."""
        self.pop(key)
        size = plan_bytes(plan)
        self._plans[key] = (plan, size)
        self.nbytes += size
        while len(self._plans) > 1 and (len(self._plans) > self.max_plans or self.nbytes > self.max_bytes):
            _, (_, dropped) = self._plans.popitem(last=False)
            self.nbytes -= dropped

    def pop(self, key: Hashable) -> None:
        entry = self._plans.pop(key, None)
        if entry is not None:
            self.nbytes -= entry[1]

    def clear(self) -> None:
        self._plans.clear()
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self._plans)

    def __iter__(self) -> Iterator[Hashable]:
        return iter(self._plans)

    def values(self) -> ValuesView[Plan]:
        return {key: plan for key, (plan, _) in self._plans.items()}.values()
