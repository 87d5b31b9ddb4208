"""The cfg parser on the fixtures and on deliberately odd text; layer option errors."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import edgecnn
from edgecnn.errors import ModelFormatError
from edgecnn.importers.darknet import DarknetCfgWarning, load_darknet, parse_cfg, read_cfg

FIXTURES = Path(__file__).parents[2] / "fixtures" / "darknet"
SEED_001_CFG = Path(edgecnn.__file__).parent / "data" / "darknet" / "tiny-yolo-seed001.cfg"

EXPECTED_KINDS = {
    "tiny.cfg": ["convolutional", "maxpool"] * 2
    + ["convolutional"] * 4
    + ["maxpool"]
    + ["convolutional"] * 4
    + ["maxpool"]
    + ["convolutional"] * 6
    + ["avgpool", "softmax"],
    "yolov1-tiny.cfg": ["convolutional", "maxpool"] * 6 + ["convolutional"] * 2 + ["connected", "detection"],
    "yolov2-tiny.cfg": ["convolutional", "maxpool"] * 6 + ["convolutional"] * 3 + ["region"],
    "yolov3-tiny.cfg": ["convolutional", "maxpool"] * 6
    + ["convolutional"] * 4
    + ["yolo", "route", "convolutional", "upsample", "route", "convolutional", "convolutional", "yolo"],
}


@pytest.mark.parametrize("path", [*sorted(FIXTURES.glob("*.cfg")), SEED_001_CFG], ids=lambda p: p.name)
def test_parse_every_fixture(path: Path) -> None:
    sections = read_cfg(path)
    assert sections[0].kind == "net"
    assert sections[0].get_int("channels") == 3
    kinds = [s.kind for s in sections[1:]]
    expected = EXPECTED_KINDS.get(path.name)
    if expected is not None:
        assert kinds == expected
    for section in sections:
        assert all(" " not in key and " " not in value for key, (value, _) in section.options.items())


def test_fixture_values() -> None:
    sections = read_cfg(FIXTURES / "yolov3-tiny.cfg")
    yolo = sections[17]
    assert yolo.kind == "yolo"
    assert yolo.get_ints("mask") == (3, 4, 5)
    assert yolo.get_floats("anchors") == (10, 14, 23, 27, 37, 58, 81, 82, 135, 169, 344, 319)
    assert sections[18].get_ints("layers") == (-4,)
    assert sections[0].get_float("hue") == 0.1
    region = read_cfg(FIXTURES / "yolov2-tiny.cfg")[-1]
    assert region.get_floats("anchors")[:2] == (0.57273, 0.677385)


def test_seed001_fixture_layout() -> None:
    sections = read_cfg(SEED_001_CFG)
    convs = [s for s in sections if s.kind == "convolutional"]
    assert [s.get_int("filters") for s in convs] == [16, 32, 64, 128, 256, 512, 1024, 1024, 1024]
    assert all(s.get_int("size") == 3 and s.get_int("stride") == 1 and s.get_int("pad") == 1 for s in convs)
    assert [s.get_int("output") for s in sections if s.kind == "connected"] == [256, 4096, 1470]
    assert [s.get_int("stride") for s in sections if s.kind == "maxpool"] == [2] * 6


def test_whitespace_comments_and_aliases() -> None:
    text = """
    # comment
    ; another comment
    [Network]
      width = 4 1 6   # Darknet drops all whitespace
    height=8
    [conv]
    filters=4
    [max]
    [soft]
    [conn]
    [avg]
    """
    sections = parse_cfg(text)
    assert [s.kind for s in sections] == [
        "net",
        "convolutional",
        "maxpool",
        "softmax",
        "connected",
        "avgpool",
    ]
    assert sections[0].get_int("width") == 416
    assert sections[0].options["height"] == ("8", 6)


def test_repeated_key_keeps_first_with_warning() -> None:
    with pytest.warns(DarknetCfgWarning, match="option 'filters': repeated at line 5"):
        sections = parse_cfg("[net]\nwidth=1\n[convolutional]\nfilters=2\nfilters=3\n")
    assert sections[1].get_int("filters") == 2


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no sections"),
        ("width=3\n[net]\n", "before any"),
        ("[net\n", "malformed section header"),
        ("[]\n", "malformed section header"),
        ("[net]\nwidth\n", "expected 'key=value'"),
        ("[net]\n=3\n", "expected 'key=value'"),
        ("[convolutional]\n[net]\n", "first section must be"),
    ],
)
def test_structural_errors(text: str, message: str) -> None:
    with pytest.raises(ModelFormatError, match=message):
        parse_cfg(text, "bad.cfg")


def test_value_errors_name_file_line_and_key() -> None:
    net = parse_cfg("[net]\nwidth=abc\nanchors=1,2,\nratio=nan\nlayers=1,x\n", "my.cfg")[0]
    with pytest.raises(ModelFormatError, match=r"my\.cfg:2: \[net\], option 'width': expected an integer"):
        net.get_int("width")
    assert net.get_floats("anchors") == (1.0, 2.0)
    with pytest.raises(ModelFormatError, match="expected a number"):
        net.get_float("ratio")
    with pytest.raises(ModelFormatError, match="expected integers in int32's range, got '1,x'"):
        net.get_ints("layers")
    with pytest.raises(ModelFormatError, match="missing required option 'height'"):
        net.get_int("height")
    assert net.get_int("height", 7) == 7


NET = "[net]\nwidth=8\nheight=8\nchannels=3\n"


def load_text(tmp_path: Path, text: str) -> edgecnn.Model:
    cfg = tmp_path / "net.cfg"
    cfg.write_text(text)
    return edgecnn.Model(load_darknet(cfg, None, random_seed=0))


def test_unknown_options_warn_once_per_layer(tmp_path: Path) -> None:
    text = NET + "momentum=0.9\n[convolutional]\nfilters=2\nflavour=mint\n[yolo]\nmask=0\nclasses=1\nnum=1\n"
    text = text.replace("filters=2", "filters=6")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_text(tmp_path, text)
    messages = [str(w.message) for w in caught if issubclass(w.category, DarknetCfgWarning)]
    assert len(messages) == 1 and "flavour" in messages[0] and "[convolutional]" in messages[0]


@pytest.mark.parametrize(
    ("layers", "message"),
    [
        ("[crnn]\n", r"unsupported Darknet layer type \[crnn\]"),
        ("[local]\n", r"unsupported Darknet layer type \[local\]"),
        ("[convolutional]\nfilters=4\ngroups=3\n", "do not split into 3 groups"),
        ("[convolutional]\nfilters=0\n", "must be at least 1"),
        ("[convolutional]\nfilters=2\nsize=11\n", "does not fit"),
        ("[convolutional]\nfilters=2\nactivation=elu\n", "activation 'elu' is not supported"),
        ("[convolutional]\nfilters=2\ndilation=2\n", "option 'dilation'.*not supported"),
        ("[convolutional]\nfilters=2\nbinary=1\n", "option 'binary'.*not supported"),
        ("[maxpool]\nsize=9\nstride=1\npadding=0\n", "does not fit"),
        ("[maxpool]\nsize=2\npadding=4\n", "does not fit"),
        ("[route]\nlayers=0\n", "not an earlier layer"),
        ("[maxpool]\n[route]\nlayers=-3\n", "not an earlier layer"),
        ("[maxpool]\n[route]\nlayers=0\ngroups=2\n", "3 channels do not split into 2 groups"),
        ("[maxpool]\nsize=1\n[maxpool]\nstride=2\n[route]\nlayers=-1,-2\n", "joins layers of sizes"),
        ("[maxpool]\n[route]\nlayers=-1\ngroups=3\ngroup_id=3\n", "group_id 3 is not in"),
        ("[convolutional]\nfilters=2\n[shortcut]\nfrom=-2\n", "not an earlier layer"),
        (
            "[convolutional]\nfilters=2\n[convolutional]\nfilters=3\n[shortcut]\nfrom=-2\n",
            "adds layers of shapes",
        ),
        ("[maxpool]\n[shortcut]\nfrom=-1,0\n", "only one 'from'"),
        ("[upsample]\nstride=-2\n", "must be at least 1"),
        ("[reorg]\nstride=3\n", "does not divide"),
        ("[reorg]\nstride=2\nreverse=1\n", "option 'reverse'"),
        ("[softmax]\ngroups=5\n", "cannot split 192 inputs into 5 groups"),
        ("[yolo]\nmask=0\nclasses=1\nnum=1\n", "expects 6 input channels"),
        ("[convolutional]\nfilters=6\n[yolo]\nmask=0,4\nnum=2\nclasses=1\n", "does not index"),
        ("[region]\nnum=1\nclasses=1\n", "expects 6 input channels"),
        (
            "[connected]\noutput=10\n[detection]\nside=1\nnum=1\nclasses=1\ncoords=4\n",
            "expects 6 input values",
        ),
        ("[connected]\noutput=6\n[detection]\nside=1\nnum=1\nclasses=1\ncoords=3\n", "4 box coordinates"),
        (
            "[convolutional]\nfilters=6\n[yolo]\nmask=0\nclasses=1\n[convolutional]\n",
            "follows a detection layer",
        ),
        (
            "[convolutional]\nfilters=6\n[yolo]\nmask=0\nclasses=1\n[route]\nlayers=-1\n",
            "reads the output of detection layer 1",
        ),
    ],
)
def test_layer_errors(tmp_path: Path, layers: str, message: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DarknetCfgWarning)
        with pytest.raises(ModelFormatError, match=message):
            load_text(tmp_path, NET + layers)


def test_net_errors(tmp_path: Path) -> None:
    with pytest.raises(ModelFormatError, match="must be positive"):
        load_text(tmp_path, "[net]\nwidth=8\nheight=8\n[maxpool]\n")
    with pytest.raises(ModelFormatError, match="no layers"):
        load_text(tmp_path, NET)
    path = tmp_path / "binary.cfg"
    path.write_bytes(b"[net]\n\xff\xfe\n")
    with pytest.raises(ModelFormatError, match="not a text file"):
        read_cfg(path)


def test_input_size_override(tmp_path: Path) -> None:
    graph = load_darknet(FIXTURES / "yolov2-tiny.cfg", None, random_seed=0, input_size=(96, 64))
    assert graph.inputs[0].shape == ("batch", 3, 64, 96)
