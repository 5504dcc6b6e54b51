"""Charts of the metrics page, drawn as SVG on the server: bars and lines laid out in a
viewBox the page scales to its width, so the page needs no script and no chart library."""

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

WIDTH, HEIGHT = 360, 180
LEFT, RIGHT, TOP, BOTTOM = 46, 8, 10, 22  # room for the y labels and the time labels
PLOT_W = WIDTH - LEFT - RIGHT
PLOT_H = HEIGHT - TOP - BOTTOM
# The page's palette has this many line colours (static/css/insights.css .c0 … .c5).
COLOURS = 6


@dataclass
class Bar:
    x: float
    y: float
    width: float
    height: float
    title: str


@dataclass
class Line:
    name: str
    colour: int
    segments: list[str]  # polyline points; a gap (no value) starts a new segment
    dots: list[tuple[float, float, str]]  # x, y, title


@dataclass
class Chart:
    id: str
    title: str
    unit: str
    y_ticks: list[tuple[float, str]]
    x_ticks: list[tuple[float, str]]
    bars: list[Bar] = field(default_factory=list)
    lines: list[Line] = field(default_factory=list)
    empty: bool = False
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    plot_right: int = WIDTH - RIGHT
    baseline: int = TOP + PLOT_H
    y_label_x: int = LEFT - 4
    x_label_y: int = HEIGHT - 6
    middle: tuple[float, float] = (LEFT + PLOT_W / 2, TOP + PLOT_H / 2)


def nice_top(value: float) -> tuple[float, int]:
    """The round number (1, 2 or 5 × 10ⁿ) a y axis runs up to, at least `value`, and how many
    equal steps divide it into round ticks (1 → 5 × 0.2, 2 → 4 × 0.5, 5 → 5 × 1)."""
    if value <= 0:
        return 1, 5
    power = 10 ** math.floor(math.log10(value))
    for lead, steps in ((1, 5), (2, 4), (5, 5), (10, 5)):
        if value <= lead * power * (1 + 1e-9):
            return lead * power, steps
    return 10 * power, 5


def time_top(value: float) -> tuple[float, int]:
    """nice_top for seconds, in the unit the axis is labelled in (s, min or h)."""
    unit = 1 if value < 60 else 60 if value < 3600 else 3600
    top, steps = nice_top(value / unit)
    return top * unit, steps


def number(value: float) -> str:
    """12, 2.5, 0.25: a figure as short as it can be."""
    if value == int(value):
        return str(int(value))
    return f"{value:.2f}".rstrip("0").rstrip(".")


def seconds(value: float) -> str:
    """A duration for an axis or a tooltip: 450 ms, 12 s, 4.5 min, 2 h."""
    if value == 0:
        return "0"
    if value < 1:
        return f"{round(value * 1000)} ms"
    if value < 60:
        return f"{number(round(value, 1))} s"
    if value < 3600:
        return f"{number(round(value / 60, 1))} min"
    return f"{number(round(value / 3600, 1))} h"


def span(step: timedelta) -> str:
    """A bucket's length as the charts name it: "5 min", "hour", "6 h", "day"."""
    minutes = round(step.total_seconds() / 60)
    if minutes % 1440 == 0:
        return "day" if minutes == 1440 else f"{minutes // 1440} days"
    if minutes % 60 == 0:
        return "hour" if minutes == 60 else f"{minutes // 60} h"
    return f"{minutes} min"


def when(at: datetime, step: timedelta) -> str:
    """A bucket's start as its axis label: the time of day, or the date for long buckets."""
    if step >= timedelta(hours=12):
        return at.strftime("%b %d")
    if step >= timedelta(hours=2):
        return at.strftime("%a %H:%M")
    return at.strftime("%H:%M")


class Frame:
    """Where bucket i and value v land in the plot."""

    def __init__(self, starts: list[datetime], step: timedelta, top: tuple[float, int]) -> None:
        self.starts = starts
        self.step = step
        self.top, self.steps = top
        self.slot = PLOT_W / max(len(starts), 1)

    def x(self, i: int) -> float:
        return round(LEFT + (i + 0.5) * self.slot, 1)

    def y(self, value: float) -> float:
        return round(TOP + PLOT_H * (1 - value / self.top), 1)

    def y_ticks(self, label: Callable[[float], str] = number) -> list[tuple[float, str]]:
        values = [self.top * k / self.steps for k in range(self.steps + 1)]
        return [(self.y(v), label(v)) for v in values]

    def x_ticks(self) -> list[tuple[float, str]]:
        # Four or five labels, whatever the number of buckets, so they never overlap.
        every = max(math.ceil(len(self.starts) / 4), 1)
        return [
            (self.x(i), when(at, self.step)) for i, at in enumerate(self.starts) if i % every == 0
        ]


def bar_chart(
    id: str, title: str, unit: str, starts: list[datetime], step: timedelta, values: list[int]
) -> Chart:
    frame = Frame(starts, step, nice_top(max(max(values, default=0), 5)))
    width = round(frame.slot * 0.7, 1)
    bars = [
        Bar(
            x=round(frame.x(i) - width / 2, 1),
            y=frame.y(v),
            width=width,
            height=round(frame.y(0) - frame.y(v), 1),
            title=f"{when(at, step)}: {v}",
        )
        for i, (at, v) in enumerate(zip(starts, values, strict=True))
        if v
    ]
    return Chart(
        id, title, unit, frame.y_ticks(), frame.x_ticks(), bars=bars, empty=not any(values)
    )


def line_chart(
    id: str,
    title: str,
    unit: str,
    starts: list[datetime],
    step: timedelta,
    lines: dict[str, list[float | None]],
    label: Callable[[float], str] = number,
    scale: Callable[[float], tuple[float, int]] = nice_top,
    least: float = 0,
) -> Chart:
    """Lines over the buckets; None leaves a gap. `label` writes a value (axis, tooltip),
    `scale` finds the axis's top and ticks for the highest value (at least `least`)."""
    values = [v for series in lines.values() for v in series if v is not None]
    frame = Frame(starts, step, scale(max(max(values, default=0), least)))
    drawn = []
    for n, (name, series) in enumerate(lines.items()):
        segments, current, dots = [], [], []
        for i, v in enumerate(series):
            if v is None:
                if current:
                    segments.append(" ".join(current))
                current = []
                continue
            x, y = frame.x(i), frame.y(v)
            current.append(f"{x},{y}")
            dots.append((x, y, f"{name} · {when(starts[i], step)}: {label(v)}"))
        if current:
            segments.append(" ".join(current))
        drawn.append(Line(name, n % COLOURS, segments, dots))
    return Chart(
        id,
        title,
        unit,
        frame.y_ticks(label),
        frame.x_ticks(),
        lines=drawn,
        empty=not values,
    )
