"""Each installed peer engine runs a small zoo model and agrees with edgecnn; absent peers skip."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import edgecnn
from edgecnn.bench.peers import ENGINES
from edgecnn.bench.runner import relative_error
from edgecnn.bench.zoo import model_path


@pytest.mark.parametrize("name", [n for n in ENGINES if n != "edgecnn"])
@pytest.mark.parametrize("model", ["squeezenet1.1", "shufflenetv2"])
def test_peer_matches_edgecnn(name: str, model: str, zoo_cache: Path) -> None:
    engine = ENGINES[name]()
    reason = engine.available()
    if reason is not None:
        pytest.skip(reason)
    path = model_path(model, zoo_cache, 0.125, 64)
    x = np.random.default_rng(0).standard_normal((2, 3, 64, 64), dtype=np.float32)
    run = engine.prepare(path, 1, x.shape, zoo_cache / "converted")
    want = edgecnn.load(path, threads=1)(x)
    got = run(x)
    assert relative_error(got, want) < 1e-4
    assert engine.version() not in ("", "?")
