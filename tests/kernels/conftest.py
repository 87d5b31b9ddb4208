"""The CPU kernel tests run in a process started as a plan would start it (TBB, bound workers);
``retune`` changes the kernels' rules for one test through the CPU tuning record."""

from collections.abc import Iterator
from contextlib import ExitStack

import pytest

from edgecnn.kernels.cpu import initialize_cpu_runtime
from kernels.support import Retune, tuned

initialize_cpu_runtime()


@pytest.fixture
def retune() -> Iterator[Retune]:
    """``retune(field=value, ...)``: that tuning in effect until the test ends."""
    with ExitStack() as stack:
        yield lambda **fields: stack.enter_context(tuned(**fields))
