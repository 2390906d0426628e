"""A top-down plot of an executed trajectory as inline SVG (no plotting library, no script, nothing fetched)."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

SIZE = 260  # px
MARGIN = 24


def trajectory_svg(path: Sequence[Sequence[float]], title: str = "") -> str:
    """`path`: [x, y, yaw] points relative to the start pose (x forward, y left), shown with x up, y to the left,
    so the robot starts at the bottom centre facing up; the end pose is an arrow."""
    xs = [p[0] for p in path] or [0.0]
    ys = [p[1] for p in path] or [0.0]
    span = max(1.0, max(map(abs, xs)), max(map(abs, ys))) * 1.15
    scale = (SIZE - 2 * MARGIN) / (2 * span)
    cx, cy = SIZE / 2, SIZE / 2

    def px(x: float, y: float) -> tuple[float, float]:
        return cx - y * scale, cy - x * scale

    points = " ".join(f"{u:.1f},{v:.1f}" for u, v in (px(x, y) for x, y in zip(xs, ys, strict=True)))
    grid = []
    step = 10 ** math.floor(math.log10(span)) if span >= 1 else 0.5
    k = -math.floor(span / step)
    while k * step <= span:
        u, _ = px(0, k * step)
        _, v = px(k * step, 0)
        grid.append(f'<line x1="{u:.1f}" y1="{MARGIN}" x2="{u:.1f}" y2="{SIZE - MARGIN}" class="grid"/>')
        grid.append(f'<line x1="{MARGIN}" y1="{v:.1f}" x2="{SIZE - MARGIN}" y2="{v:.1f}" class="grid"/>')
        k += 1
    ex, ey = px(xs[-1], ys[-1])
    yaw = path[-1][2] if path else 0.0
    tip = px(xs[-1] + 0.25 * span * 0.3 * math.cos(yaw), ys[-1] + 0.25 * span * 0.3 * math.sin(yaw))
    sx, sy = px(0, 0)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{SIZE}" height="{SIZE}" viewBox="0 0 {SIZE} {SIZE}" '
        f'role="img" aria-label="{html.escape(title)}">'
        "<style>.grid{stroke:#ddd;stroke-width:1}.path{fill:none;stroke:#1f6feb;stroke-width:2.5}"
        ".end{stroke:#d1242f;stroke-width:3}text{font:11px sans-serif;fill:#555}</style>"
        + "".join(grid)
        + f'<polyline class="path" points="{points}"/>'
        f'<circle cx="{sx:.1f}" cy="{sy:.1f}" r="4" fill="#2da44e"/>'
        f'<line class="end" x1="{ex:.1f}" y1="{ey:.1f}" x2="{tip[0]:.1f}" y2="{tip[1]:.1f}"/>'
        f'<circle cx="{ex:.1f}" cy="{ey:.1f}" r="3.5" fill="#d1242f"/>'
        f'<text x="4" y="14">{html.escape(title)}</text>'
        f'<text x="4" y="{SIZE - 6}">grid {step:g} m; start green, facing up</text>'
        "</svg>"
    )
