"""RuntimeOptions.resolve: the one place the runtime's environment variables are read and checked."""

from __future__ import annotations

import pytest

from edgecnn.errors import ConfigurationError, DeviceError
from edgecnn.runtime.options import RuntimeOptions


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EDGECNN_NUM_THREADS", raising=False)
    monkeypatch.delenv("EDGECNN_BIND_THREADS", raising=False)


def test_threads_from_argument_then_environment_then_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    assert RuntimeOptions.resolve().threads >= 1
    monkeypatch.setenv("EDGECNN_NUM_THREADS", " 3 ")
    assert RuntimeOptions.resolve().threads == 3
    assert RuntimeOptions.resolve(threads=1).threads == 1


@pytest.mark.parametrize(
    ("text", "bound"), [("0", False), ("false", False), ("No", False), ("1", True), ("", True)]
)
def test_bind_threads_from_the_environment(monkeypatch: pytest.MonkeyPatch, text: str, bound: bool) -> None:
    monkeypatch.setenv("EDGECNN_BIND_THREADS", text)
    assert RuntimeOptions.resolve().bind_threads is bound
    assert RuntimeOptions.resolve(bind_threads=True).bind_threads is True


def test_bad_values_are_configuration_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigurationError, match="threads must be >= 1"):
        RuntimeOptions.resolve(threads=0)
    with pytest.raises(ConfigurationError, match="batch_parallel"):
        RuntimeOptions.resolve(batch_parallel="sometimes")
    monkeypatch.setenv("EDGECNN_NUM_THREADS", "many")
    with pytest.raises(ConfigurationError, match="EDGECNN_NUM_THREADS"):
        RuntimeOptions.resolve()
    monkeypatch.delenv("EDGECNN_NUM_THREADS")
    monkeypatch.setenv("EDGECNN_BIND_THREADS", "maybe")
    with pytest.raises(ConfigurationError, match="EDGECNN_BIND_THREADS"):
        RuntimeOptions.resolve()


def test_device_is_canonical_and_checked() -> None:
    assert RuntimeOptions.resolve(device=" CPU ").device == "cpu"
    with pytest.raises(DeviceError):
        RuntimeOptions.resolve(device="tpu")
