"""Records the scenario traces the scene governor is tuned on (seed 001's Fig. 5.7 inputs): each
scenario runs as a child process for --seconds while this script samples every 50 ms both the
system's per-core utilisation (edgecnn.monitor's LoadSampler, as `edgecnn monitor --trace` does)
and the scenario's own process tree (found with psutil, timed from the scheduler's schedstat): its
CPU use as a share of all cores (``scene_pct``) and its demand, CPU time plus time spent runnable
but waiting for a core (``demand_pct``): on a machine shared with other work, the load the
scenario would put on a machine of its own.

Scenarios: cnn (`edgecnn monitor`: the bundled face detector on the bundled video, sample -> infer
-> draw), idle (sleep), compile (gcc -O2 on a generated C file, in a loop), video (PyAV decoding
the sample video at its frame rate, as a player does), browser (headless chromium scripted by
selenium: a canvas animation, DOM updates and scrolling on a local page).

    .venv/bin/python lab/governor_record.py [--seconds 30] [--scenes cnn,idle,...] [--out DIR]
"""

from __future__ import annotations

import argparse
import csv
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from common import REPO, machine_line
from edgecnn.monitor.load import LoadSampler

PERIOD = 0.05
OUT = REPO / "tests" / "dvfs" / "data"
PYTHON = sys.executable

VIDEO_PLAYER = """
import sys, time, av
path = sys.argv[1]
while True:
    with av.open(path) as container:
        stream = container.streams.video[0]
        start = time.monotonic()
        for frame in container.decode(stream):
            frame.to_ndarray(format="rgb24")
            delay = start + float(frame.time) - time.monotonic()
            if delay > 0:
                time.sleep(delay)
"""

BROWSER = """
import sys, tempfile, time
from pathlib import Path
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
page = Path(tempfile.mkdtemp()) / "page.html"
page.write_text('''<html><body style="height:6000px"><canvas id=c width=800 height=600></canvas>
<div id=list></div><script>
const c = document.getElementById('c').getContext('2d'); let t = 0;
function frame() { t += 1; c.clearRect(0, 0, 800, 600);
  for (let i = 0; i < 400; i++) { c.fillStyle = 'hsl(' + ((i * 7 + t) % 360) + ',70%,50%)';
    c.beginPath(); c.arc(400 + 300 * Math.sin(i + t / 30), 300 + 200 * Math.cos(i * 1.3 + t / 45), 6, 0, 7); c.fill(); }
  requestAnimationFrame(frame); }
frame();
setInterval(() => { const list = document.getElementById('list'); list.innerHTML = '';
  for (let i = 0; i < 300; i++) { const d = document.createElement('div'); d.textContent = 'row ' + i + ' ' + Math.random(); list.appendChild(d); } }, 500);
</script></body></html>''')
options = webdriver.ChromeOptions()
options.binary_location = "/usr/bin/chromium"
for argument in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", f"--user-data-dir={tempfile.mkdtemp()}"):
    options.add_argument(argument)
driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
try:
    driver.get(page.as_uri())
    print("ready", flush=True)
    y = 0
    while True:
        y = (y + 400) % 5000
        driver.execute_script(f"window.scrollTo(0, {y})")
        time.sleep(1.0)
finally:
    driver.quit()
"""


def generated_c(directory: Path) -> Path:
    """A C file that takes gcc -O2 a few seconds: many small functions with loops to optimise."""
    source = directory / "work.c"
    body = [
        f"double f{i}(double *a, int n) {{ double s = 0; for (int k = 0; k < n; k++) "
        f"{{ s += a[k] * {i + 1}.0 / (k + {i % 7 + 1}); if (s > {i * 10}) s -= a[k / 2]; }} return s; }}"
        for i in range(3000)
    ]
    source.write_text("\n".join(body) + "\n")
    return source


def command(scene: str, scratch: Path) -> list[str]:
    from edgecnn.cli.monitor_cmd import sample_video

    if scene == "cnn":
        return [
            str(Path(PYTHON).parent / "edgecnn"),
            "monitor",
            "--port",
            "0",
            "--trace",
            str(scratch / "monitor.csv"),
        ]
    if scene == "idle":
        return ["sleep", "3600"]
    if scene == "compile":
        source = generated_c(scratch)
        return ["bash", "-c", f"while :; do gcc -O2 -c {source} -o {scratch}/work.o; done"]
    if scene == "video":
        return [PYTHON, "-c", VIDEO_PLAYER, sample_video()]
    if scene == "browser":
        return [PYTHON, "-c", BROWSER]
    raise SystemExit(f"unknown scenario {scene}")


READY = {"cnn": "http://", "browser": "ready"}
SETTLE_S = {"cnn": 4.0, "browser": 2.0}


class TreeMeter:
    """CPU time and run-queue wait of a process tree, from every thread's /proc/PID/task/TID/
    schedstat (the scheduler's own nanosecond accounting, far finer than psutil's 10 ms ticks).
    Increments are summed per thread, so a thread that ends loses only its last period."""

    def __init__(self, root: psutil.Process) -> None:
        self.root = root
        self.last: dict[str, tuple[int, int]] = {}
        self.read()

    def read(self) -> tuple[float, float]:
        """Seconds run and seconds spent waiting to run since the previous read."""
        current: dict[str, tuple[int, int]] = {}
        try:
            processes = [self.root, *self.root.children(recursive=True)]
        except psutil.NoSuchProcess:
            processes = []
        for process in processes:
            for stat in Path(f"/proc/{process.pid}/task").glob("*/schedstat"):
                try:
                    run, wait = (int(v) for v in stat.read_text().split()[:2])
                except (OSError, ValueError):
                    continue
                current[str(stat.parent)] = (run, wait)
        ran = waited = 0
        for task, (run, wait) in current.items():
            last_run, last_wait = self.last.get(task, (0, 0))
            ran += run - last_run
            waited += wait - last_wait
        self.last = current
        return ran * 1e-9, waited * 1e-9


def record(scene: str, seconds: float, out: Path) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        child = subprocess.Popen(
            command(scene, Path(scratch)),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # its own process group: one signal reaches the whole tree
        )
        try:
            if scene in READY:
                assert child.stdout is not None
                for line in child.stdout:
                    if READY[scene] in line:
                        break
                else:
                    raise SystemExit(f"{scene} ended before it was ready")
            time.sleep(SETTLE_S.get(scene, 1.0))
            sample_tree(scene, psutil.Process(child.pid), seconds, out)
        finally:
            os.killpg(child.pid, signal.SIGINT)  # the monitor finishes its trace on Ctrl-C
            try:
                child.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
        if scene == "cnn":
            add_inferences(Path(scratch) / "monitor.csv", out)


def add_inferences(monitor_trace: Path, out: Path) -> None:
    """Copies the monitor's inference_end events of the sampled stretch into ``out`` (both traces
    end when the monitor is stopped; the monitor's clock is shifted onto ours by their ends)."""
    with open(monitor_trace, newline="") as handle:
        rows = list(csv.reader(handle))
    ends = [(float(r[0]), r[-2], r[-1]) for r in rows[1:] if r[1] == "inference_end"]
    monitor_end = max(float(r[0]) for r in rows[1:] if r[1] == "sample")
    with open(out, newline="") as handle:
        ours = list(csv.reader(handle))
    our_end = float(ours[-1][0])
    shift = our_end - monitor_end
    width = len(ours[0])
    events = [
        [f"{t + shift:.4f}", "inference_end", *[""] * (width - 4), frame, latency]
        for t, frame, latency in ends
        if 0 <= t + shift <= our_end
    ]
    merged = sorted(ours[1:] + events, key=lambda r: float(r[0]))
    with open(out, "w", newline="") as handle:
        csv.writer(handle).writerows([ours[0], *merged])
    print(f"cnn: {len(events)} inferences in the sampled {our_end:.1f} s")


def sample_tree(scene: str, root: psutil.Process, seconds: float, out: Path) -> None:
    """Every 50 ms: the system's per-core load, the tree's CPU use (``scene_pct``) and its demand
    (``demand_pct``: CPU time plus run-queue wait, the load it would put on a machine of its own)."""
    sampler = LoadSampler()
    cores = sampler.cores
    meter = TreeMeter(root)
    start = last = time.monotonic()
    late = 0
    with open(out, "w", newline="") as handle:
        writer = csv.writer(handle)
        names = [f"cpu{i}_pct" for i in range(cores)]
        writer.writerow(["time_s", "kind", *names, "scene_pct", "demand_pct", "frame", "latency_ms"])
        tick = 1
        while tick * PERIOD <= seconds:
            delay = start + tick * PERIOD - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            now = time.monotonic()
            sample = sampler.sample(now - start)
            ran, waited = meter.read()
            span = (now - last) * cores
            last = now
            cells = [f"{p:.1f}" for p in sample.cpu_percent]
            busy = min(100.0, 100 * ran / span)
            demand = min(100.0, 100 * (ran + waited) / span)
            writer.writerow([f"{now - start:.4f}", "sample", *cells, f"{busy:.1f}", f"{demand:.1f}", "", ""])
            missed = int((time.monotonic() - start) / PERIOD) - tick
            late += max(0, missed)
            tick += 1 + max(0, missed)
    print(f"{scene}: {out} ({tick - 1 - late} samples, {late} periods missed)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--scenes", default="cnn,idle,compile,video,browser")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    print(machine_line())
    for scene in args.scenes.split(","):
        record(scene, args.seconds, args.out / f"{scene}.csv")
    print(machine_line())


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
