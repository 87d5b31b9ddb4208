"""The page in a real headless browser: Debian's chromium driven by Selenium through the system's
chromedriver. The page loads, the frame image changes, the chart receives samples; a screenshot is
taken and checked for the page's parts (not pixels). Skipped when chromium or chromedriver is
absent (`.ci/run` installs them)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from edgecnn.monitor import LoadSampler, Monitor
from edgecnn.vision.detector import Detection
from edgecnn.vision.draw import draw_detections
from edgecnn.vision.sources import Frame, FrameError, open_sources
from monitor.support import FakeDetector

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
SAMPLE = Path(__file__).parents[2] / "src/edgecnn/data/monitor/sample.mp4"

pytestmark = pytest.mark.skipif(
    not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()),
    reason=f"no headless browser: {CHROMIUM} and {CHROMEDRIVER} are needed "
    "(Debian: apt-get install chromium chromium-driver)",
)


class BoxingDetector(FakeDetector):
    """Finds one box that moves with the frame count (the real drawing then draws it)."""

    def detect(self, image: object) -> list[object]:
        super().detect(image)
        x = self.calls * 7 % 200
        return [Detection((x, 40.0, x + 100.0, 160.0), 0.9, 0, "thing")]


def sample_frames() -> Iterator[Frame | FrameError]:
    return open_sources([str(SAMPLE)], loop=True)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[object]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--window-size=1200,900",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()


def wait_until(condition: object, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError(f"not true within {timeout} s: {condition}")


def test_the_page_shows_advancing_frames_and_a_live_chart(browser: object, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver

    assert isinstance(browser, WebDriver)
    with Monitor(
        BoxingDetector(seconds=0.03),
        sample_frames,
        draw=draw_detections,
        sampler=LoadSampler(),
        info={"model": "fake boxes", "source": SAMPLE.name},
    ) as monitor:
        browser.get(monitor.url)
        image = browser.find_element(By.ID, "frame")
        wait_until(lambda: browser.execute_script("return arguments[0].naturalWidth", image) == 320)
        first = image.screenshot_as_png
        wait_until(lambda: image.screenshot_as_png != first, timeout=10)  # the frame changes

        chart = browser.find_element(By.ID, "chart")
        wait_until(lambda: int(chart.get_attribute("data-samples") or 0) >= 10)
        received = int(chart.get_attribute("data-samples") or 0)
        wait_until(lambda: int(chart.get_attribute("data-samples") or 0) > received)

        assert browser.find_element(By.ID, "status").text == "running"
        assert browser.find_element(By.ID, "run-info").text == f"fake boxes on {SAMPLE.name}"
        assert browser.find_element(By.ID, "fps").text not in ("", "–")
        assert browser.find_element(By.ID, "detections").text == "1"
        assert browser.find_element(By.ID, "inference-ms").text.endswith(" ms")
        cores = browser.find_elements(By.CSS_SELECTOR, "#cores .bar")
        assert len(cores) == monitor.recorder.sampler.cores
        assert all(bar.text.startswith(f"cpu{i}") for i, bar in enumerate(cores))
        drawn = browser.execute_script(
            "const c = arguments[0]; const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
            "let n = 0; for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 0) n++; return n;",
            chart,
        )
        assert drawn > 1000  # grid, labels and the per-core lines are on the canvas
        screenshot = tmp_path / "monitor.png"
        assert browser.save_screenshot(str(screenshot))
    assert screenshot.stat().st_size > 10_000
