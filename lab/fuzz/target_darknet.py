"""Darknet: a cfg and its weights. The cfg is mutated by section and option (a value set to an edge
value, an option added from the ones converters read, a section deleted, duplicated or retyped), and
as lines; the weights in their header words, their floats and their length."""

from __future__ import annotations

import random
import struct
import tempfile
from pathlib import Path

import mutate

from edgecnn.importers.darknet import write_random_weights

Case = dict[str, bytes]
NAME = "darknet"
NET = "[net]\nwidth={w}\nheight={w}\nchannels=3\n"
CFGS = (
    NET.format(w=16) + "[convolutional]\nfilters=8\nsize=3\npad=1\nbatch_normalize=1\nactivation=leaky\n"
    "[maxpool]\nsize=2\nstride=2\n[convolutional]\nfilters=8\nsize=3\npad=1\nactivation=mish\n"
    "[shortcut]\nfrom=-2\nactivation=linear\n[upsample]\nstride=2\n[route]\nlayers=-1,0\n"
    "[convolutional]\nfilters=18\nsize=1\nactivation=linear\n[yolo]\nmask=0,1,2\nanchors=1,2,3,4,5,6\n"
    "classes=1\nnum=3\n",
    NET.format(w=16) + "[convolutional]\nfilters=16\nsize=3\nstride=2\npad=1\nactivation=swish\n"
    "[reorg3d]\nstride=2\n[route]\nlayers=-1\n[convolutional]\nfilters=14\nsize=1\nactivation=linear\n"
    "[region]\nanchors=1,1,2,2\nnum=2\nclasses=2\ncoords=4\nsoftmax=1\n",
    NET.format(w=8) + "[convolutional]\nfilters=4\nsize=3\npad=1\nactivation=relu\n[maxpool]\nsize=2\n"
    "stride=2\n[connected]\noutput=16\nactivation=logistic\n[dropout]\nprobability=0.5\n[connected]\n"
    "output=12\nbatch_normalize=1\nactivation=linear\n[detection]\nside=1\nnum=2\nclasses=2\ncoords=4\n",
    NET.format(w=8) + "[convolutional]\nfilters=8\nsize=3\ngroups=1\npad=1\nactivation=tanh\n"
    "[convolutional]\nfilters=8\nsize=3\ngroups=8\npad=1\n[reorg]\nstride=2\n[avgpool]\n"
    "[softmax]\ngroups=2\ntemperature=2\n[cost]\n",
)
KEYS = (
    "filters", "size", "stride", "pad", "padding", "groups", "batch_normalize", "activation", "output",
    "num", "classes", "mask", "anchors", "coords", "side", "layers", "from", "group_id", "temperature",
    "scale", "alpha", "beta", "width", "height", "channels", "scale_x_y", "dilation",
)  # fmt: skip
KINDS = ("convolutional", "connected", "maxpool", "avgpool", "route", "shortcut", "upsample", "yolo",
         "region", "detection", "reorg", "reorg3d", "softmax", "dropout", "cost", "crnn", "net")  # fmt: skip
FRAGMENTS = ("[yolo]", "num=1000000000", "stride=100000000000000000000", "[route]", "layers=-100",
             "mask=" + ",".join(["0"] * 5000), "#", "=", "[", "[]", "filters=2147483647")  # fmt: skip


def seeds() -> list[Case]:
    cases = []
    with tempfile.TemporaryDirectory() as folder:
        cfg, weights = Path(folder) / "model.cfg", Path(folder) / "weights.weights"
        for index, text in enumerate(CFGS):
            cfg.write_text(text)
            write_random_weights(cfg, weights, seed=index)
            cases.append({"model.cfg": text.encode(), "weights.weights": weights.read_bytes()})
    return cases


def _sections(text: str) -> list[list[str]]:
    """The cfg as sections of lines (the first line of each its header)."""
    sections: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("[") or not sections:
            sections.append([line])
        else:
            sections[-1].append(line)
    return sections


def _option_value(rng: random.Random, key: str) -> str:
    if key == "activation":
        return rng.choice(("linear", "leaky", "mish", "swish", "logistic", "relu", "tanh", "elu", ""))
    if key in ("layers", "mask", "anchors", "from"):
        count = rng.choice((0, 1, 2, 3, 10))
        return ",".join(
            str(mutate.interesting_int(rng) if rng.random() < 0.3 else rng.randint(-4, 6))
            for _ in range(count)
        )
    if rng.random() < 0.2:
        return repr(mutate.interesting_float(rng))
    return str(mutate.interesting_int(rng) if rng.random() < 0.6 else rng.randint(-2, 8))


def _edit_cfg(text: str, rng: random.Random) -> str:
    sections = _sections(text)
    if not sections:  # earlier edits emptied the cfg
        return rng.choice(CFGS)
    section = rng.choice(sections)
    action = rng.random()
    if action < 0.45:
        options = [i for i, line in enumerate(section) if "=" in line]
        if options:
            index = rng.choice(options)
            key = section[index].split("=", 1)[0]
            section[index] = f"{key}={_option_value(rng, key)}"
    elif action < 0.65:
        key = rng.choice(KEYS)
        section.append(f"{key}={_option_value(rng, key)}")
    elif action < 0.75 and len(section) > 1:
        del section[rng.randrange(1, len(section))]
    elif action < 0.85:
        section[0] = f"[{rng.choice(KINDS)}]"
    elif action < 0.93 and len(sections) > 1:
        sections.remove(section)
    else:
        sections.insert(rng.randrange(len(sections) + 1), list(section))
    return "\n".join(line for part in sections for line in part) + "\n"


def _edit_weights(data: bytes, rng: random.Random) -> bytes:
    action = rng.random()
    if action < 0.3 and len(data) >= 12:
        word = rng.randrange(3)
        value = mutate.clamp(mutate.interesting_int(rng), 32, signed=True)
        return data[: 4 * word] + struct.pack("<i", value) + data[4 * word + 4 :]
    if action < 0.5 and len(data) > 24:
        position = rng.randrange(20, len(data) - 4) & ~3
        value = struct.pack("<f", mutate.interesting_float(rng))
        return data[:position] + value + data[position + 4 :]
    if action < 0.7:
        cut = rng.randrange(len(data) + 1)
        return data[:cut] if rng.random() < 0.5 else data + rng.randbytes(rng.choice((4, 8, 1000)))
    return mutate.mutate_bytes(data, rng)


def mutate_case(case: Case, rng: random.Random) -> Case:
    cfg, weights = case["model.cfg"], case["weights.weights"]
    for _ in range(rng.choice((1, 1, 2, 3))):
        action = rng.random()
        text = cfg.decode("utf-8", "replace")
        if action < 0.6:
            cfg = _edit_cfg(text, rng).encode()
        elif action < 0.7:
            cfg = mutate.mutate_lines(text, rng, FRAGMENTS).encode()
        elif action < 0.75:
            cfg = mutate.mutate_bytes(cfg, rng)
        else:
            weights = _edit_weights(weights, rng)
    return {"model.cfg": cfg, "weights.weights": weights}
