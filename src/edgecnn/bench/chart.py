"""docs/benchmarks.png: each engine's median latency relative to onnxruntime, per model, drawn with
Pillow (no plotting library needed). Log-scaled, so 2x slower and 2x faster look equally far from 1."""

from __future__ import annotations

import math
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from edgecnn.bench.runner import BASELINE_ENGINE, BenchResult

PALETTE = ("#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
WIDTH = 1100
LEFT = 190  # room for "squeezenet1.1 b8"
RIGHT = 90  # room for the value past the longest bar
TOP = 90
BAR = 16
GROUP_GAP = 10


def _font(size: int) -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    try:
        return ImageFont.load_default(size=size)
    except (TypeError, OSError):  # Pillow without FreeType: the fixed bitmap font
        return ImageFont.load_default()


def chart_rows(result: BenchResult) -> list[tuple[str, list[tuple[str, float]]]]:
    """[(case label, [(engine, ratio to onnxruntime)])] in table order, baseline left out."""
    groups: dict[tuple[str, int], list[tuple[str, float]]] = {}
    for m in result.measurements:
        ratio = result.ratio(m)
        if m.engine != BASELINE_ENGINE and ratio is not None:
            groups.setdefault((m.model, m.batch), []).append((m.engine, ratio))
    return [(f"{model} b{batch}", bars) for (model, batch), bars in groups.items()]


def draw_chart(result: BenchResult, path: Path) -> None:
    """Write the PNG; raises ValueError when there is nothing to compare (no onnxruntime rows)."""
    rows = chart_rows(result)
    if not rows:
        raise ValueError("no engine has an onnxruntime baseline to compare with")
    engines = list(dict.fromkeys(engine for _, bars in rows for engine, _ in bars))
    colours = {engine: PALETTE[i % len(PALETTE)] for i, engine in enumerate(engines)}
    ratios = [r for _, bars in rows for _, r in bars]
    low = 2.0 ** (math.floor(math.log2(min(0.5, *ratios))) - 1)  # one more power of two: room for labels
    high = 2.0 ** math.ceil(math.log2(max(2.0, *ratios)))
    height = TOP + sum(len(bars) * BAR + GROUP_GAP for _, bars in rows) + 50
    image = Image.new("RGB", (WIDTH, height), "white")
    draw = ImageDraw.Draw(image)
    font, small, bold = _font(14), _font(12), _font(16)

    def x_of(ratio: float) -> float:
        span = math.log2(high) - math.log2(low)
        return LEFT + (math.log2(ratio) - math.log2(low)) / span * (WIDTH - LEFT - RIGHT)

    s = result.settings
    title = f"Median latency relative to onnxruntime ({s.threads} threads; log scale, left of 1x = faster)"
    draw.text((20, 12), title, fill="black", font=bold)
    draw.text((20, 36), f"{result.machine.get('cpu')}, {result.date}", fill="#555555", font=small)
    legend_x = 20
    for engine in engines:
        draw.rectangle((legend_x, 62, legend_x + 14, 76), fill=colours[engine])
        draw.text((legend_x + 20, 61), engine, fill="black", font=font)
        legend_x += 40 + int(draw.textlength(engine, font=font))

    bottom = height - 40
    exponent = round(math.log2(low))
    while 2.0**exponent <= high:  # grid lines at powers of two
        ratio = 2.0**exponent
        x = x_of(ratio)
        draw.line(
            (x, TOP - 6, x, bottom), fill="#333333" if ratio == 1 else "#dddddd", width=2 if ratio == 1 else 1
        )
        label = f"{ratio:g}x"
        draw.text((x - draw.textlength(label, font=small) / 2, bottom + 6), label, fill="black", font=small)
        exponent += 1

    y = TOP
    for label, bars in rows:
        draw.text(
            (LEFT - 10 - draw.textlength(label, font=font), y + len(bars) * BAR / 2 - 9),
            label,
            fill="black",
            font=font,
        )
        for engine, ratio in bars:
            x0, x1 = sorted((x_of(1.0), x_of(ratio)))
            draw.rectangle((x0, y + 2, max(x1, x0 + 1), y + BAR - 2), fill=colours[engine])
            text = f"{ratio:.2f}x"
            tx = x_of(ratio) + 4 if ratio >= 1 else x_of(ratio) - 4 - draw.textlength(text, font=small)
            draw.text((tx, y + 1), text, fill="black", font=small)
            y += BAR
        y += GROUP_GAP
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path)
