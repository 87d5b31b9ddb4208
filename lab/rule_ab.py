"""Whole models under a previous rule against the current one, in one process (issue 4).

Each model is planned twice: once with fields of the CPU tuning record at their old values while it
is planned (``--old field=value``, repeatable: a kernel heuristic's threshold; through
`edgecnn.kernels.cpu.tuning_record.using_cpu_tuning`, see common.tuned), once with the defaults. Kernels are chosen and sized when a plan is built, so each copy keeps its rule.
Both copies and an onnxruntime session (set up as `edgecnn bench` sets it) then run alternately,
the order turning every round; medians of wall and process CPU time; outputs are checked equal.
The only comparison this shared VM's drift allows (runs minutes apart differ by 10-40%).
``--phases`` tags blocks of rounds by the cores' distance; ``--layers N`` adds the N layers whose
time moved most (``Model.profile`` of both plans, alternating).

    .venv/bin/python lab/rule_ab.py --old min_f43_tiles=36 \\
        --models squeezenet1.1,resnet50 --rounds 30 --mark tuning:winograd-rule
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import os
import shlex
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx

import edgecnn
from common import (
    FAR_NS,
    NOTES,
    far_apart,
    load_model,
    model_input,
    ort_options,
    replace_section,
    round_trip_ns,
    tuned,
)
from edgecnn.bench.machine import cpu_model
from edgecnn.bench.zoo import build_model

Setting = tuple[str, object]  # tuning-record field, old value


def parse_setting(text: str) -> Setting:
    """``field=value`` (value a Python literal) -> (field, value); the field is checked when planning."""
    name, _, literal = text.partition("=")
    if not (name and literal):
        raise argparse.ArgumentTypeError(f"expected field=value, got {text!r}")
    return name.strip(), ast.literal_eval(literal)


def patched(settings: Sequence[Setting]) -> contextlib.AbstractContextManager[None]:
    """Plans built inside the block use the tuning record with every setting at its old value."""
    return tuned(**dict(settings))


@dataclass(frozen=True)
class Cold:
    """What happens before each timed call: ``evict_mb`` MiB written (standing in for the other
    engines' runs in `edgecnn bench`, which leave the caches full of their own data), then a pause
    of ``gap_ms`` (the bench's pause between runs). Both zero: calls back to back."""

    evict_mb: int = 0
    gap_ms: float = 0.0

    def __call__(self, buffer: np.ndarray) -> None:
        if buffer.size:
            buffer += 1.0
        if self.gap_ms:
            time.sleep(self.gap_ms / 1e3)

    def describe(self) -> str:
        if not (self.evict_mb or self.gap_ms):
            return "calls back to back"
        return f"before each call {self.evict_mb} MiB written and a {self.gap_ms:g} ms pause"


def rotated_times(
    runs: dict[str, Callable[[], object]], rounds: int, warmup: int = 3, cold: Cold = Cold()
) -> dict[str, tuple[float, float]]:
    """Median (wall ms, process CPU ms) of each callable: one call of each per round, the first one
    turning every round, ``cold`` before each."""
    names = list(runs)
    buffer = np.zeros(cold.evict_mb << 18, dtype=np.float32)
    samples: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for round_ in range(warmup + rounds):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            cold(buffer)
            wall, cpu = time.perf_counter(), time.process_time()
            runs[name]()
            if round_ >= warmup:
                samples[name].append(((time.perf_counter() - wall) * 1e3, (time.process_time() - cpu) * 1e3))
    return {
        name: (float(np.median([w for w, _ in v])), float(np.median([c for _, c in v])))
        for name, v in samples.items()
    }


def prepared_models(
    model_name: str, threads: int, settings: Sequence[Setting]
) -> tuple[onnx.ModelProto, str, np.ndarray, edgecnn.Model, edgecnn.Model]:
    """The zoo model, its input's name and value, and edgecnn's model planned under the old
    settings and as the tree has it, checked equal."""
    model = build_model(model_name)
    name, x = model_input(model)
    old = load_model(model, threads)
    with patched(settings):
        old(x)  # plans (and runs) under the old rule
    new = load_model(model, threads)
    expected = new(x)  # the zoo models have one output
    scale = float(np.abs(expected).max()) or 1.0
    np.testing.assert_allclose(old(x), expected, rtol=1e-3, atol=1e-4 * scale)
    return model, name, x, old, new


def prepared_runs(
    model_name: str, threads: int, settings: Sequence[Setting]
) -> dict[str, Callable[[], object]]:
    """The model planned under the old settings ("old"), as the tree has it ("new"), and in
    onnxruntime ("onnxruntime"), each a callable running it once; old and new checked equal."""
    import onnxruntime as ort

    model, name, x, old, new = prepared_models(model_name, threads, settings)
    session = ort.InferenceSession(
        model.SerializeToString(), ort_options(threads), providers=["CPUExecutionProvider"]
    )
    return {"old": lambda: old(x), "new": lambda: new(x), "onnxruntime": lambda: session.run(None, {name: x})}


def phased_times(
    runs: dict[str, Callable[[], object]], rounds: int, seconds: float, cold: Cold = Cold()
) -> dict[str, tuple[int, dict[str, tuple[float, float]]]]:
    """For ``seconds``: blocks of ``rounds`` rotated rounds, each after one reading of the cores'
    distance (core_distance.py); per phase ("near", "far"): the number of blocks and the median
    over them of each callable's block medians."""
    blocks: dict[str, list[dict[str, tuple[float, float]]]] = {"near": [], "far": []}
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        phase = "far" if far_apart(round_trip_ns()) else "near"
        blocks[phase].append(rotated_times(runs, rounds, warmup=1, cold=cold))
    return {
        phase: (
            len(found),
            {name: tuple(float(np.median([b[name][i] for b in found])) for i in (0, 1)) for name in runs},  # type: ignore[misc]
        )
        for phase, found in blocks.items()
        if found
    }


def layer_table(
    model_name: str, threads: int, settings: Sequence[Setting], top: int, repeats: int = 6
) -> list[str]:
    """The ``top`` layers whose time moved most, old plan against new (``Model.profile``, the two
    alternating ``repeats`` times, 10 runs each; medians), with the cores' round trip before and after."""
    _, _, x, old, new = prepared_models(model_name, threads, settings)
    before = round_trip_ns()
    samples: dict[str, list[list[float]]] = defaultdict(lambda: [[], []])
    kernels: dict[str, list[str]] = defaultdict(lambda: ["", ""])
    for _ in range(repeats):
        for side, net in enumerate((old, new)):
            for layer in net.profile(x, iterations=10, warmup=2).layers:
                samples[layer.name][side].append(layer.mean_ms)
                kernels[layer.name][side] = layer.kernel
    after = round_trip_ns()
    medians = {name: [float(np.median(v)) for v in pair] for name, pair in samples.items()}
    moved = sorted(medians, key=lambda n: -abs(medians[n][1] - medians[n][0]))[:top]
    lines = [
        "",
        f"{model_name}, layer by layer (cores' round trip {before:.0f} ns before, {after:.0f} ns after; "
        f"sum of all layers: old {sum(m[0] for m in medians.values()):.2f} ms, new {sum(m[1] for m in medians.values()):.2f} ms):",
        "",
        "| layer | old kernel | old ms | new kernel | new ms |",
        "|---|---|---:|---|---:|",
    ]
    lines += [
        f"| {n} | {kernels[n][0]} | {medians[n][0]:.3f} | {kernels[n][1]} | {medians[n][1]:.3f} |"
        for n in moved
    ]
    print("\n".join(lines), flush=True)
    return lines


def table(
    models: Sequence[str],
    threads: int,
    rounds: int,
    settings: Sequence[Setting],
    command: str,
    cold: Cold = Cold(),
    phases: float = 0.0,
    layers: int = 0,
) -> list[str]:
    load = os.getloadavg()
    old = ", ".join(f"`{name} = {value!r}`" for name, value in settings)
    lines = [
        f"Old rule: {old}; new: the tree as committed. Batch 1, {threads} thread(s), medians of {rounds} rounds",
        f"of old / new / onnxruntime in one process (the order turning every round; {cold.describe()});",
        "CPU = process CPU time."
        + (
            f" For {phases:g} s per model, blocks of {rounds} rounds, each tagged by the cores' round trip just"
            f" before it: near (at most {FAR_NS:g} ns) or far (lab/core_distance.py); medians of the"
            " blocks' medians."
            if phases
            else ""
        ),
        f"Machine: {cpu_model()}, {os.cpu_count()} cores, load average {load[0]:.2f} / {load[1]:.2f} at the start.",
        "",
        f"Command: `{command}`",
        "",
        "| model | old ms | new ms | new/old | old CPU ms | new CPU ms | onnxruntime ms | new/onnxruntime |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for model_name in models:
        runs = prepared_runs(model_name, threads, settings)
        if phases:
            rows = [
                (f"{model_name}, cores {p} ({n} blocks)", t)
                for p, (n, t) in phased_times(runs, rounds, phases, cold).items()
            ]
        else:
            rows = [(model_name, rotated_times(runs, rounds, cold=cold))]
        for label, t in rows:
            (old_ms, old_cpu), (new_ms, new_cpu), (ort_ms, _) = t["old"], t["new"], t["onnxruntime"]
            lines.append(
                f"| {label} | {old_ms:.2f} | {new_ms:.2f} | {new_ms / old_ms:.3f}x | {old_cpu:.2f} | "
                f"{new_cpu:.2f} | {ort_ms:.2f} | {new_ms / ort_ms:.2f}x |"
            )
            print(lines[-1], flush=True)
        if layers:
            lines += layer_table(model_name, threads, settings, layers)
    lines.append("")
    lines.append(f"Load average at the end: {os.getloadavg()[0]:.2f}.")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", type=parse_setting, action="append", required=True, metavar="field=value")
    parser.add_argument("--models", default="squeezenet1.1,resnet50,resnet18,googlenet")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--evict-mb", type=int, default=0, help="MiB written before each timed call")
    parser.add_argument("--gap-ms", type=float, default=0.0, help="pause before each timed call")
    parser.add_argument(
        "--phases", type=float, default=0.0, metavar="SECONDS",
        help="run each model this long in blocks of --rounds, split by the cores' distance",
    )  # fmt: skip
    parser.add_argument(
        "--layers", type=int, default=0, metavar="N", help="also the N layers that moved most"
    )
    parser.add_argument("--mark", help="write the table between <!-- MARK:start/end --> in --doc")
    parser.add_argument("--doc", type=Path, default=NOTES / "2026-11-tuning.md")
    args = parser.parse_args()
    olds = " ".join(f"--old {shlex.quote(f'{n}={v!r}')}" for n, v in args.old)
    command = (
        f".venv/bin/python lab/rule_ab.py {olds} --models {args.models} --threads {args.threads} "
        f"--rounds {args.rounds}"
        + (f" --evict-mb {args.evict_mb}" if args.evict_mb else "")
        + (f" --gap-ms {args.gap_ms:g}" if args.gap_ms else "")
        + (f" --phases {args.phases:g}" if args.phases else "")
        + (f" --layers {args.layers}" if args.layers else "")
        + (f" --mark {args.mark}" if args.mark else "")
    )
    cold = Cold(args.evict_mb, args.gap_ms)
    lines = table(
        args.models.split(","), args.threads, args.rounds, args.old, command, cold, args.phases, args.layers
    )
    if args.mark:
        args.doc.write_text(replace_section(args.doc.read_text(), args.mark, lines))
        print(f"wrote {args.doc}")


if __name__ == "__main__":
    main()
