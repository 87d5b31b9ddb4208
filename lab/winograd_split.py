"""How a Winograd layer's work is split between two threads: the planned split against tiles
split evenly (issue 36).

``winograd.chunking`` splits a layer with too few tiles per thread (MIN_SPLIT_TILES) by output
channels: both threads transform every tile, each multiplies half of the transformed filters. For
each distinct Winograd layer of the given zoo models this times, interleaved at 2 threads, the
planned split against one chunk of tiles per thread with every output channel (outputs checked
equal).

    .venv/bin/python lab/winograd_split.py resnet50 resnet18 [--rounds 40]
"""

from __future__ import annotations

import argparse
import math
from functools import partial

import numpy as np

from common import conv_layers, interleaved, load_model, machine_line, model_input
from edgecnn.bench.zoo import build_model
from edgecnn.kernels.cpu.conv.winograd import WinogradConv
from edgecnn.kernels.cpu.system.threads import cpu_threads

THREADS = 2


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("models", nargs="+")
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    print(machine_line(THREADS))
    print(
        "| model | kernel | input | filters | tiles | planned (tiles, channels, workers) | planned ms | tiles split ms |"
    )
    print("|---|---|---|---|---:|---|---:|---:|")
    for name in args.models:
        proto = build_model(name)
        _, x = model_input(proto)
        seen = set()
        for node, types, values, chosen in conv_layers(load_model(proto, THREADS), x):
            shape, filters = tuple(types[0].shape), values[1].shape
            if not chosen.startswith("winograd") or (shape, filters, chosen) in seen:
                continue
            seen.add((shape, filters, chosen))
            m = 2 if chosen.endswith("f23") else 4
            planned, split = (WinogradConv(node, types, values, m) for _ in range(2))
            s = planned.setup
            split._chunking[THREADS] = (math.ceil(split.tile_count / THREADS), s.out_channels, THREADS)
            data = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
            outs = [np.empty((s.batch, s.out_channels, *s.out), np.float32) for _ in range(2)]
            with cpu_threads(THREADS):
                plan = planned.chunking(THREADS)
                ms = interleaved(
                    {
                        "planned": partial(planned.run_into, outs[0], data),
                        "split": partial(split.run_into, outs[1], data),
                    },
                    args.rounds,
                )
            np.testing.assert_allclose(outs[0], outs[1], rtol=1e-4, atol=1e-3)
            print(
                f"| {name} | {chosen} | {shape} | {filters[:2]} | {planned.tile_count} | {plan} | "
                f"{ms['planned']:.3f} | {ms['split']:.3f} |"
            )


if __name__ == "__main__":
    main()
