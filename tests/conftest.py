"""Suite-wide order (slow tests first) and isolation: a developer's own per-user caches (the
`edgecnn tune` kernel choices, saved device plans) must not change which kernels the tests
exercise; nor may runtime.serial's rule, which would run every small test model on one thread
whatever threads a test asks for."""

import dataclasses
import os
import tempfile
from collections.abc import Iterator

import pytest

os.environ["EDGECNN_CACHE_DIR"] = tempfile.mkdtemp(prefix="edgecnn-test-cache-")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked slow run first. `make test` runs xdist's worksteal schedule: a worker that runs
    out of tests takes the unstarted half of the other's queue, which balances the end of the run
    unless a long test is still running there; started first, none is."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(autouse=True)
def _threads_as_asked(request: pytest.FixtureRequest) -> Iterator[None]:
    """Small models keep the threads a test gives them (tests marked serial_rule test the rule)."""
    if request.node.get_closest_marker("serial_rule"):
        yield
        return
    from edgecnn.kernels.cpu.tuning_record import active_cpu_tuning, using_cpu_tuning

    with using_cpu_tuning(dataclasses.replace(active_cpu_tuning(), serial_model_macs=0)):
        yield
