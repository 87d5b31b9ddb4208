"""Cross-check an energy meter against the vendor's own tool: sample the meter for a few seconds
at rest and print its average power next to nvidia-smi's reading (when NVML is the meter).

    python lab/energy_meter_check.py [--meter nvml] [--seconds 1]

Runs with only the standard library and edgecnn's energy package (PYTHONPATH=src)."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import time

from edgecnn.energy import PowerMonitor, open_meter


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--meter", default="nvml")
    parser.add_argument("--seconds", type=float, default=1.0)
    args = parser.parse_args()
    meter = open_meter(args.meter)
    with PowerMonitor(meter, interval=0.05) as monitor:
        time.sleep(args.seconds)
    report = monitor.report(1)
    print(f"meter: {meter.describes}")
    print(
        f"{args.seconds:g} s at rest: {report.joules:.2f} J, {report.average_watts:.2f} W average, {len(monitor.samples)} samples"
    )
    if args.meter == "nvml" and shutil.which("nvidia-smi"):
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=power.draw", "--format=csv,noheader"], capture_output=True, text=True
        )
        print(f"nvidia-smi power.draw: {smi.stdout.strip()}")


if __name__ == "__main__":
    main()
