"""How close the TFLite importer comes to LiteRT's reference kernels, beyond the test suite's draws.

For every int8 test case, many random inputs: the share of output integers equal to LiteRT's, the
largest difference in steps of the output scale, and the operator the optimised graph runs (an
integer kernel after QDQ folding, or float between Dequantize/Quantize). For every float case, the
largest difference relative to the output's largest magnitude. With ``--fuzz N``, N random
mutations of the fuzz test's model, counting exceptions that are not EdgeCNNErrors.

    .venv/bin/python lab/tflite_fidelity.py --draws 20 --fuzz 4000
"""

from __future__ import annotations

import argparse
import random
import struct
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

from common import machine_line

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import edgecnn
from importers.tflite import test_float_ops, test_int8_ops, test_tflite_fuzz
from importers.tflite.harness import run_litert

INTEGER_OPS = {"QLinearConv", "Int8Gemm", "QLinearMatMul", "Int8Conv"}


def int8_rows(draws: int, folder: Path) -> list[str]:
    rows = []
    for name in sorted(test_int8_ops.CASES):
        equal = total = worst = 0
        ops: list[str] = []
        for draw in range(draws):
            test_int8_ops.RNG = np.random.default_rng(draw)
            data, feeds, int8_name, _, _ = test_int8_ops.build_int8(test_int8_ops.CASES[name])
            path = folder / "int8.tflite"
            path.write_bytes(data)
            model = edgecnn.load(path)
            got = model.run(feeds)[int8_name].astype(np.int32)
            want = run_litert(data, feeds)[int8_name].astype(np.int32)
            equal += int((got == want).sum())
            total += got.size
            worst = max(worst, int(np.abs(got - want).max()))
            ops = [n.op for n in model.optimized_graph.nodes]
        integer = sorted(set(ops) & INTEGER_OPS) or [
            "float between DQ/Q" if "QuantizeLinear" in ops[1:] else "stored integers"
        ]
        rows.append(f"| {name} | {total} | {equal / total:.2%} | {worst} | {', '.join(integer)} |")
    return rows


def float_rows(folder: Path) -> list[str]:
    rows = []
    for name in sorted(test_float_ops.CASES):
        data, feeds = test_float_ops.CASES[name]()
        path = folder / "float.tflite"
        path.write_bytes(data)
        ours = edgecnn.load(path).run(feeds)
        theirs = run_litert(data, feeds)
        worst = 0.0
        for key, want in theirs.items():
            scale = max(float(np.abs(want).max(initial=0.0)), 1e-6)
            worst = max(worst, float(np.abs(ours[key].astype(np.float64) - want).max(initial=0.0)) / scale)
        rows.append(f"| {name} | {worst:.1e} |")
    return rows


def fuzz(count: int, folder: Path) -> tuple[int, int]:
    """(cases that loaded, cases that raised something other than an EdgeCNNError)."""
    rng = random.Random(1)
    valid = test_tflite_fuzz.VALID
    loaded = crashes = 0
    path = folder / "fuzz.tflite"
    for _ in range(count):
        data = bytearray(valid)
        if rng.random() < 0.5:
            for _ in range(rng.randint(1, 6)):
                data[rng.randrange(len(data))] ^= rng.randint(1, 255)
        else:
            word = rng.randrange(len(data) // 4)
            value = rng.choice(
                [0, 1, 3, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, rng.getrandbits(32), rng.randrange(len(data))]
            )
            data[4 * word : 4 * word + 4] = struct.pack("<I", value)
        path.write_bytes(bytes(data))
        try:
            edgecnn.load(path)
            loaded += 1
            test_tflite_fuzz.load_or_format_error(path)
        except edgecnn.EdgeCNNError:
            pass
        except Exception as exc:  # a finding: print it and go on counting
            crashes += 1
            print(f"finding: {type(exc).__name__}: {exc}", file=sys.stderr)
    return loaded, crashes


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--draws", type=int, default=10, help="random inputs per int8 case")
    parser.add_argument("--fuzz", type=int, default=0, help="random mutations of the fuzz model")
    args = parser.parse_args()
    warnings.simplefilter("ignore", RuntimeWarning)
    print(machine_line())
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        print(f"\nint8 cases, {args.draws} random inputs each (LiteRT BUILTIN_REF kernels)\n")
        print(
            "| case | integers | equal to LiteRT | largest difference (steps) | runs as |\n|---|---|---|---|---|"
        )
        print("\n".join(int8_rows(args.draws, folder)))
        print("\nfloat cases: largest difference relative to the output's largest magnitude\n")
        print("| case | difference |\n|---|---|")
        print("\n".join(float_rows(folder)))
        if args.fuzz:
            loaded, crashes = fuzz(args.fuzz, folder)
            print(
                f"\nfuzz: {args.fuzz} mutations, {loaded} loaded, {crashes} raised something other than an EdgeCNNError"
            )


if __name__ == "__main__":
    main()
