"""Caffe nets imported by edgecnn match an independent numpy forward pass of the same blobs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import edgecnn
from edgecnn.importers.caffe import write_random_caffemodel
from importers.caffe.caffe_reference import forward

FIXTURES = Path(__file__).parents[2] / "fixtures" / "caffe"
HERE = Path(__file__).parent


def check(prototxt: Path, tmp_path: Path, batch: int = 1, seed: int = 0) -> edgecnn.Model:
    caffemodel = tmp_path / "net.caffemodel"
    write_random_caffemodel(prototxt, caffemodel, seed=seed)
    model = edgecnn.load(prototxt, weights=caffemodel)
    rng = np.random.default_rng(seed)
    feeds = {s.name: rng.standard_normal((batch, *s.shape[1:])).astype(np.float32) for s in model.inputs}
    got = model.run(feeds)
    expected = forward(str(prototxt), str(caffemodel), feeds)
    for name, value in got.items():
        ref = expected[name]
        scale = np.abs(ref).max() or 1.0
        np.testing.assert_allclose(value, ref, rtol=1e-4, atol=1e-4 * scale, err_msg=name)
    return model


@pytest.mark.parametrize("name", ["lenet", "bvlc_alexnet", "bvlc_reference_caffenet", "bvlc_googlenet"])
def test_bvlc_fixtures_match_the_numpy_reference(name: str, tmp_path: Path) -> None:
    model = check(FIXTURES / f"{name}.deploy.prototxt", tmp_path)
    assert model.outputs[0].name == "prob" and model.outputs[0].shape[0] == "N"


def test_alexnet_runs_any_batch(tmp_path: Path) -> None:
    check(FIXTURES / "lenet.deploy.prototxt", tmp_path, batch=3)


@pytest.mark.parametrize("name", sorted(p.stem for p in (HERE / "nets").glob("*.prototxt")))
def test_every_layer_type_matches_the_numpy_reference(name: str, tmp_path: Path) -> None:
    check(HERE / "nets" / f"{name}.prototxt", tmp_path, batch=2)
