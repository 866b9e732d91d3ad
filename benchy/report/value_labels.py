"""Value labels of the PNG figures (plots.py), placed once a figure is laid out: each beside its
point where it covers no other point, line, error bar or label. Apart from plots.py because it
works in pixels, on any figure, and knows nothing of results."""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure as MplFigure

LABEL_FONT = 8

# Value labels waiting for their figure's layout: placed by save, where pixel positions are final.
PENDING: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def place(fig: MplFigure) -> None:
    """Each value label goes above its point, else below it, beside it or on a diagonal, else
    nowhere: never over another label, another point, a line or the axes' edge (a missing label is better than an unreadable one;
    the table has every number)."""
    pending = PENDING.pop(fig, [])
    if not pending:
        return
    fig.canvas.draw()  # final transforms
    by_axes: dict[Any, Any] = {}
    for ax, x, y, err, text, color in pending:
        by_axes.setdefault(ax, []).append((x, y, err, text, color))
    for ax, labels in by_axes.items():
        points = [ax.transData.transform((x, y)) for x, y, _, _, _ in labels]
        box = ax.get_window_extent()
        taken = [_rect(px, py, 12, 12) for px, py in points]  # every marker, with a margin
        taken += [_error_bar(ax, x, y, err) for x, y, err, _, _ in labels if err]
        taken += _line_pixels(ax)
        drawn = _drawn_points(ax)
        renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]  # (Agg canvas: fig.canvas.draw() above)
        for (x, y, err, text, color), (px, py) in zip(labels, points):
            width, height = 5.2 * len(text) + 4, 12.0
            side = width / 2 + 9
            bar = _error_bar(ax, x, y, err) if err else (px, py, px, py)
            up, down = max(7.0, bar[3] - py + 2), max(7.0, py - bar[1] + 2)  # clear of the error bar
            # (centre, bottom) of the text in pixels from the point: above, below, right, left,
            # then the diagonals, which a steep line through the point leaves free
            places = [(0.0, up), (0.0, -down - height), (side, -height / 2), (-side, -height / 2)]
            places += [(-side, up), (side, -down - height), (side, up), (-side, -down - height)]
            others = [q for q in [*points, *drawn] if (q[0], q[1]) != (px, py)]
            for dx, dy in places:
                rect = _rect(px + dx, py + dy + height / 2, width, height)
                inside = box.x0 <= rect[0] and rect[2] <= box.x1 and box.y0 <= rect[1] and rect[3] <= box.y1
                # a reader gives a label to the point nearest it: never closer to another point
                own = _distance(rect, (px, py))
                if any(_distance(rect, q) <= own for q in others):
                    continue
                if inside and not any(_overlap(rect, other) for other in taken):
                    label = ax.annotate(
                        text,
                        (x, y),
                        textcoords="offset points",
                        xytext=(dx * 72 / fig.dpi, dy * 72 / fig.dpi),
                        ha="center",
                        va="bottom",
                        fontsize=LABEL_FONT,
                        color=color,
                    )
                    # the text as the font draws it, not as estimated: still nearest its own point?
                    real = label.get_window_extent(renderer)
                    drawn_box = (real.x0, real.y0, real.x1, real.y1)
                    if any(_distance(drawn_box, q) <= _distance(drawn_box, (px, py)) for q in others):
                        label.remove()
                        continue
                    taken.append(drawn_box)
                    break


def _drawn_points(ax: Axes) -> list[tuple[float, float]]:
    """Every error-bar series' point in pixels, labelled or not: a label must be nearest its own."""
    found: list[tuple[float, float]] = []
    for container in ax.containers:
        lines = getattr(container, "lines", None)
        if not lines or lines[0] is None:
            continue
        xs, ys = lines[0].get_data()
        found += [(float(px), float(py)) for px, py in ax.transData.transform(np.column_stack([xs, ys]).astype(float))]
    return found


def _line_pixels(ax: Axes, step: float = 4.0) -> list[tuple[float, float, float, float]]:
    """Small boxes along every drawn line (series, ceilings, references), so no label sits on one."""
    boxes = []
    for line in ax.get_lines():
        if line.get_linestyle() in ("None", "none", "", " "):
            continue
        pts = ax.transData.transform(np.column_stack([line.get_xdata(), line.get_ydata()]).astype(float))
        for (x0, y0), (x1, y1) in zip(pts[:-1], pts[1:]):
            n = max(1, int(np.hypot(x1 - x0, y1 - y0) / step))
            boxes += [_rect(x0 + (x1 - x0) * k / n, y0 + (y1 - y0) * k / n, 3, 3) for k in range(n + 1)]
    return boxes


def _error_bar(ax: Axes, x: float, y: float, err: float) -> tuple[float, float, float, float]:
    """The pixels an error bar covers, caps included."""
    bottom = max(y - err, 1e-12) if ax.get_yscale() == "log" else max(y - err, 0.0)
    (x0, y0), (_, y1) = ax.transData.transform([(x, bottom), (x, y + err)])
    return (x0 - 5, y0 - 1, x0 + 5, y1 + 1)


def _distance(rect: tuple[float, float, float, float], point: Sequence[float]) -> float:
    """Pixels from a box to a point (0 inside it)."""
    dx = max(rect[0] - point[0], 0.0, point[0] - rect[2])
    dy = max(rect[1] - point[1], 0.0, point[1] - rect[3])
    return float(np.hypot(dx, dy))


def _rect(cx: float, cy: float, width: float, height: float) -> tuple[float, float, float, float]:
    return (cx - width / 2, cy - height / 2, cx + width / 2, cy + height / 2)


def _overlap(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return bool(a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3])
