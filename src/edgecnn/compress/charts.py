"""The sensitivity chart of seed 001 Fig. 3.14 (accuracy against retention, one line per layer),
drawn with Pillow so no plotting library is needed."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from edgecnn.compress.sensitivity import SensitivityPoint

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#7f7f7f")
WIDTH, HEIGHT = 900, 560
LEFT, RIGHT, TOP, BOTTOM = 80, 30, 90, 70


def _font(size: int) -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    try:
        return ImageFont.load_default(size=size)
    except (TypeError, OSError):  # Pillow without FreeType: the fixed bitmap font
        return ImageFont.load_default()


def draw_sensitivity(
    points: Sequence[SensitivityPoint], path: Path, title: str, baseline: float | None = None
) -> None:
    """Accuracy (y, %) against the kept fraction (x, falling from left to right as in the seed)."""
    if not points:
        raise ValueError("no sensitivity points to draw")
    layers = list(dict.fromkeys(p.layer for p in points))
    keeps = sorted({p.keep for p in points}, reverse=True)
    scores = [p.score for p in points] + ([baseline] if baseline is not None else [])
    grid = 0.1 if min(scores) < 0.7 else 0.05 if min(scores) < 0.9 else 0.01
    low = max(0.0, (min(scores) // grid) * grid)
    image = Image.new("RGB", (WIDTH, HEIGHT), "white")
    draw = ImageDraw.Draw(image)
    font, small, bold = _font(14), _font(12), _font(16)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    first, last = keeps[0], keeps[-1]

    def xy(keep: float, score: float) -> tuple[float, float]:
        x = LEFT + (first - keep) / ((first - last) or 1.0) * plot_w
        y = TOP + (1.0 - (score - low) / ((1.0 - low) or 1.0)) * plot_h
        return x, y

    draw.text((20, 12), title, fill="black", font=bold)
    legend_x = 20
    for i, layer in enumerate(layers):
        draw.rectangle((legend_x, 50, legend_x + 14, 64), fill=PALETTE[i % len(PALETTE)])
        draw.text((legend_x + 20, 49), layer, fill="black", font=font)
        legend_x += 40 + int(draw.textlength(layer, font=font))
    for i in range(round((1.0 - low) / grid) + 1):  # horizontal grid at round accuracies
        score = low + grid * i
        _, y = xy(first, score)
        draw.line((LEFT, y, WIDTH - RIGHT, y), fill="#e0e0e0")
        label = f"{score * 100:.0f}%"
        draw.text((LEFT - 8 - draw.textlength(label, font=small), y - 7), label, fill="black", font=small)
    for keep in keeps:
        x, _ = xy(keep, low)
        draw.line((x, TOP + plot_h, x, TOP + plot_h + 4), fill="black")
        label = f"{keep:g}"
        draw.text(
            (x - draw.textlength(label, font=small) / 2, TOP + plot_h + 8), label, fill="black", font=small
        )
    axis = "kept fraction of the layer's weights (the other layers dense)"
    draw.text(
        (LEFT + plot_w / 2 - draw.textlength(axis, font=font) / 2, HEIGHT - 30), axis, fill="black", font=font
    )
    draw.rectangle((LEFT, TOP, LEFT + plot_w, TOP + plot_h), outline="black")
    if baseline is not None:
        _, y = xy(first, baseline)
        draw.line((LEFT, y, LEFT + plot_w, y), fill="#555555", width=1)
        draw.text((LEFT + 6, y + 4), f"dense {baseline * 100:.1f}%", fill="#555555", font=small)
    for i, layer in enumerate(layers):
        colour = PALETTE[i % len(PALETTE)]
        line = [
            xy(p.keep, p.score)
            for p in sorted((p for p in points if p.layer == layer), key=lambda p: -p.keep)
        ]
        if len(line) > 1:
            draw.line(line, fill=colour, width=2)
        for x, y in line:
            draw.ellipse((x - 3, y - 3, x + 3, y + 3), fill=colour)
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path)
