"""`evalgate history HISTORY --html FILE`: the trend page (templates/history.html, through
evalgate.page). Per config, its accuracy per sweep (the lowest filter's) with the 95% interval as
a band, the floor as a line, fails and regressions marked in red, runs marked bad hollow;
configs that dropped first. One SVG path per band and line, so a year of nightly sweeps stays
small.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from evalgate import page
from evalgate.history.look import ConfigHistory

WIDTH = 720
HEIGHT = 120
PAD = 8
FAILED = frozenset({"fail", "regression"})


def _x(index: int, count: int) -> float:
    return PAD + (WIDTH - 2 * PAD) * (index / (count - 1) if count > 1 else 0.5)


def _points(values: Sequence[tuple[float, float]]) -> str:
    return " ".join(f"{x:.1f},{y:.1f}" for x, y in values)


class Dot(NamedTuple):
    """A run marked on the line: failed (or regressed), or marked bad."""

    kind: str
    x: str
    y: str
    said: str


class Trend(NamedTuple):
    """One config's runs over time, as SVG coordinates: band, floor, line, marks, the ticks
    (value, y) and the first and last sweep."""

    label: str
    band: str
    floor: str
    line: str
    dots: list[Dot]
    ticks: list[tuple[float, str]]
    first: str
    last: str


def trend(history: ConfigHistory) -> Trend | None:
    """The drawing of one config's scored runs (None: no run was scored)."""
    scored = [(r, s) for r in history.runs if (s := r.headline) is not None]
    if not scored:
        return None
    runs = [r for r, _ in scored]
    scores = [s for _, s in scored]
    values = [v for s in scores for v in (s.low, s.high)]
    values += [r.floor for r in runs if r.floor is not None]
    scale = page.Scale.around(values)
    # the scale's linear map to a height, worked out once for the chart's thousand points; the
    # scale spans every value drawn, so none needs clamping
    per = (HEIGHT - 2 * PAD) / (scale.high - scale.low)
    base = HEIGHT - PAD + scale.low * per

    def y(value: float) -> float:
        return base - value * per

    count = len(runs)
    xs = [_x(i, count) for i in range(count)]
    top = [(x, y(s.high)) for x, s in zip(xs, scores, strict=True)]
    bottom = [(x, y(s.low)) for x, s in zip(xs, scores, strict=True)]
    line = [(x, y(s.value)) for x, s in zip(xs, scores, strict=True)]
    floors = [(x, y(r.floor)) for x, r in zip(xs, runs, strict=True) if r.floor is not None]
    dots = []
    for run, (x, dot) in zip(runs, line, strict=True):
        if run.marked:
            dots.append(Dot("marked", f"{x:.1f}", f"{dot:.1f}", f"{run.sweep}: marked bad"))
        elif run.verdict in FAILED:
            dots.append(Dot("failed", f"{x:.1f}", f"{dot:.1f}", f"{run.sweep}: {run.verdict}"))
    label = (
        f"{history.name}: {count} runs from {runs[0].sweep} to {runs[-1].sweep}, "
        f"last {scores[-1].value:.3f}"
    )
    return Trend(
        label,
        f"M{_points(top)} L{_points(bottom[::-1])} Z",
        _points(floors),
        _points(line),
        dots,
        [(t, f"{y(t) + 4:.1f}") for t in scale.ticks()],
        runs[0].sweep,
        runs[-1].sweep,
    )


class Figure(NamedTuple):
    """A config's chart: its standing, caption and drawing."""

    history: ConfigHistory
    tone: page.Tone
    word: str
    numbers: str
    floor: str
    notes: str
    trend: Trend | None


def _figure(history: ConfigHistory) -> Figure:
    last = history.runs[-1]
    score = last.headline
    numbers = (
        f"{score.value:.3f} [{score.low:.3f}, {score.high:.3f}] n={score.n}"
        if score is not None
        else "no score"
    )
    failed = sum(1 for r in history.runs if r.verdict in FAILED)
    marked = sum(1 for r in history.runs if r.marked is not None)
    tone = "fail" if history.dropped else page.tone(last.verdict)
    word = "dropped" if history.dropped else last.verdict
    notes = [f"{len(history.runs)} runs", f"{failed} failed or regressed"]
    notes += [f"{marked} marked bad"] if marked else []
    floor = f"floor {last.floor:g} ({last.floor_matched})" if last.floor is not None else ""
    return Figure(history, tone, word.upper(), numbers, floor, ", ".join(notes), trend(history))


def render(location: str, found: Sequence[ConfigHistory], where: Mapping[str, str]) -> str:
    """The whole page."""
    dropped = sum(1 for h in found if h.dropped)
    runs = sum(len(h.runs) for h in found)
    return page.render(
        "history.html",
        title="evalgate history",
        tone="fail" if dropped else "pass",
        summary=f"{len(found)} configs, {runs} runs, {dropped} dropped",
        counts=[("dropped", dropped, "fail"), ("steady", len(found) - dropped, "pass")],
        figures=[_figure(h) for h in found],
        width=WIDTH,
        height=HEIGHT,
        location=location,
        where=" ".join(f"{k}={v}" for k, v in where.items()),
    )
