"""The figures of docs/applications.md's `edgecnn monitor` section: runs the monitor (the bundled
face detector on the bundled sample video) with a 50 ms trace, screenshots its page in headless
chromium (docs/monitor.png), and plots the trace's utilisation per core over time with Pillow
(docs/monitor-trace.png: seed 001's Fig. 5.3 for our app), frame events marked underneath.

    .venv/bin/python lab/monitor_figures.py [--seconds 30] [--plot-only TRACE.csv]
"""

from __future__ import annotations

import argparse
import csv
import os
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from PIL import Image, ImageDraw, ImageFont

from common import machine_line

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
COLORS = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189), (140, 86, 75)]


def record(seconds: float, trace: Path, screenshot: Path) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    from edgecnn.cli.monitor_cmd import sample_video
    from edgecnn.monitor import Monitor
    from edgecnn.vision.detector import Detector
    from edgecnn.vision.sources import open_sources

    detector = Detector.faces()
    video = sample_video()
    info = {"model": "face detector (bundled SimpleCNN)", "source": Path(video).name}
    with Monitor(detector, lambda: open_sources([video], loop=True), trace=trace, info=info) as monitor:
        options = webdriver.ChromeOptions()
        options.binary_location = "/usr/bin/chromium"
        with tempfile.TemporaryDirectory() as profile:
            for argument in (
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--disable-background-networking",
                "--disable-component-update",
                "--no-first-run",
                f"--user-data-dir={profile}",
                "--window-size=1100,1000",
            ):
                options.add_argument(argument)
            driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
            try:
                driver.get(monitor.url)
                time.sleep(seconds)
                fit_page(driver)
                driver.save_screenshot(str(screenshot))
                Image.open(screenshot).convert("RGB").quantize(256).save(screenshot, optimize=True)
            finally:
                driver.quit()
        _, stats = monitor.board.latest()
        print(
            f"{monitor.recorder.count} samples, {monitor.recorder.missed} periods missed; last frame: {stats}"
        )


def fit_page(driver: WebDriver) -> None:
    """Make the window as tall as the page, so that the screenshot shows all of it (the chart too)."""
    chrome = driver.execute_script("return window.outerHeight - window.innerHeight")
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(driver.get_window_size()["width"], height + chrome)
    time.sleep(1)  # the page redraws its chart on resize


def plot(trace: Path, out: Path, title: str) -> None:
    with open(trace, newline="") as f:
        rows = list(csv.DictReader(f))
    samples = [r for r in rows if r["kind"] == "sample"]
    cores = sorted(k for k in samples[0] if k.startswith("cpu") and k.endswith("_pct"))
    ends = [(float(r["time_s"]), float(r["latency_ms"])) for r in rows if r["kind"] == "inference_end"]
    width, height, left, right, top = 1000, 420, 60, 20, 40
    plot_h = 280
    span = float(samples[-1]["time_s"])
    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default()

    def x(t: float) -> float:
        return left + (width - left - right) * t / span

    def y(percent: float) -> float:
        return top + plot_h * (1 - percent / 100)

    for p in range(0, 101, 25):
        draw.line([(left, y(p)), (width - right, y(p))], fill=(225, 228, 232))
        draw.text((8, y(p) - 6), f"{p}%", fill=(80, 90, 100), font=font)
    for t in range(0, int(span) + 1, max(1, int(span) // 10)):
        draw.text((x(t) - 6, top + plot_h + 6), f"{t} s", fill=(80, 90, 100), font=font)
    for i, name in enumerate(cores):
        points = [(x(float(r["time_s"])), y(float(r[name]))) for r in samples]
        draw.line(points, fill=COLORS[i % len(COLORS)], width=2)
        draw.text(
            (left + 10 + 60 * i, top - 18), name.removesuffix("_pct"), fill=COLORS[i % len(COLORS)], font=font
        )
    events_y = top + plot_h + 30
    draw.text((8, events_y), "frames", fill=(80, 90, 100), font=font)
    for end, latency in ends:
        draw.rectangle([x(end - latency / 1e3), events_y, max(x(end - latency / 1e3) + 1, x(end)), events_y + 12],
                       fill=(120, 130, 145))  # fmt: skip
    draw.text((left, height - 36), title, fill=(30, 35, 48), font=font)
    draw.text((left, height - 20), f"utilisation per core every 50 ms; grey: inferences ({len(ends)})",
              fill=(80, 90, 100), font=font)  # fmt: skip
    image.save(out)
    print(f"{out}: {len(samples)} samples over {span:.1f} s, {len(ends)} inferences")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--plot-only", type=Path, help="plot this trace instead of recording one")
    args = parser.parse_args()
    if args.plot_only is not None:
        trace = args.plot_only
    else:  # recorded in a scratch folder, under a short name (the page shows it)
        os.chdir(tempfile.mkdtemp(prefix="edgecnn-monitor-"))
        trace = Path("monitor-trace.csv")
        record(args.seconds, trace, DOCS / "monitor.png")
    plot(
        trace,
        DOCS / "monitor-trace.png",
        f"edgecnn monitor, face detector on the sample video; {machine_line()}",
    )


if __name__ == "__main__":
    main()
