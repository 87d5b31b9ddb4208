"""The `device` fixture: each test here runs once per GPU-ish backend ("opencl", "cuda"), skipped
cleanly where that backend's library or device is missing.

Two markers narrow what runs where:
- ``@pytest.mark.backends("cuda")``: only on the named backends (a case about one backend's sizes);
- ``@pytest.mark.per_backend("a, b", opencl=[...], cuda=[...])``: parametrize ``a, b`` with a
  different list of values per backend (each list runs only on its backend)."""

from __future__ import annotations

import functools

import pytest

from kernels.gpu.backends.support import KINDS, Backend, unavailable


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "backends(*kinds): run the test only on these GPU-ish backends")
    config.addinivalue_line("markers", "per_backend(argnames, **values): per-backend parameter lists")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "device" not in metafunc.fixturenames:
        return
    only = metafunc.definition.get_closest_marker("backends")
    kinds = tuple(only.args) if only else KINDS
    per = metafunc.definition.get_closest_marker("per_backend")
    if per is None:
        metafunc.parametrize("device", kinds, indirect=True, scope="session")
        return
    argnames = [name.strip() for name in per.args[0].split(",")]
    rows = [
        (kind, *(value if len(argnames) > 1 else (value,)))
        for kind in kinds
        for value in per.kwargs.get(kind, ())
    ]
    metafunc.parametrize(["device", *argnames], rows, indirect=["device"])


@functools.cache
def _missing(kind: str) -> str | None:
    return unavailable(kind)


@pytest.fixture(scope="session")
def device(request: pytest.FixtureRequest) -> Backend:
    """The backend under test; skips when it cannot run on this machine."""
    reason = _missing(request.param)
    if reason is not None:
        pytest.skip(f"{request.param}: {reason}")
    return Backend(request.param)
