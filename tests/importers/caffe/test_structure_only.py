"""A prototxt without weights read for its structure only: the same graph as with weights, blobs
zero-filled and flagged; run and convert still refuse it; `edgecnn info` shows its layer table."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from edgecnn.cli.app import EXIT_ERROR, app
from edgecnn.errors import ModelFormatError
from edgecnn.importers.caffe import STRUCTURE_ONLY, is_structure_only, load_caffe

FIXTURES = Path(__file__).parents[2] / "fixtures" / "caffe"
LENET = FIXTURES / "lenet.deploy.prototxt"


@pytest.mark.parametrize("name", ["lenet.deploy.prototxt", "bvlc_googlenet.deploy.prototxt"])
def test_structure_matches_the_weighted_load(name: str) -> None:
    structure = load_caffe(FIXTURES / name, structure_only=True)
    weighted = load_caffe(FIXTURES / name, random_seed=0)
    assert is_structure_only(structure) and not is_structure_only(weighted)
    assert structure.metadata.items() >= STRUCTURE_ONLY.items()
    assert [(n.op, n.name, n.inputs, n.outputs) for n in structure.nodes] == [
        (n.op, n.name, n.inputs, n.outputs) for n in weighted.nodes
    ]
    assert structure.initializers.keys() == weighted.initializers.keys()
    for key, value in structure.initializers.items():
        assert value.shape == weighted.initializers[key].shape, key
        assert not np.any(value), key


def test_weights_given_win_over_structure_only(tmp_path: Path) -> None:
    from edgecnn.importers.caffe import write_random_caffemodel

    caffemodel = tmp_path / "lenet.caffemodel"
    write_random_caffemodel(LENET, caffemodel, seed=3)
    graph = load_caffe(LENET, caffemodel, structure_only=True)
    assert not is_structure_only(graph) and np.any(graph.initializers["conv1/blob0"])


def test_info_shows_the_layer_table_without_weights() -> None:
    result = CliRunner().invoke(app, ["info", str(LENET)])
    assert result.exit_code == 0, result.output
    for text in ("weights: none given", "conv1", "ip2", "Softmax", "431.08k parameters", "2.29M MACs"):
        assert text in result.stdout
    document = json.loads(CliRunner().invoke(app, ["info", str(LENET), "--json"]).stdout)
    assert document["weights"] is False and document["params"] == 431_080


@pytest.mark.parametrize("command", [["run", str(LENET), "x.npy"], ["convert", str(LENET), "-o", "x.ecnn"]])
def test_run_and_convert_still_refuse_a_prototxt_without_weights(command: list[str]) -> None:
    result = CliRunner().invoke(app, command)
    assert result.exit_code == EXIT_ERROR
    assert "holds no weights" in result.stderr and "--weights" in result.stderr


def test_api_load_still_refuses() -> None:
    import edgecnn

    with pytest.raises(ModelFormatError, match="holds no weights"):
        edgecnn.load(LENET)
