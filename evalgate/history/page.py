"""`evalgate history HISTORY --html FILE`: the trend page, through evalgate.page's skeleton. Per
config, its accuracy per sweep (the lowest filter's) with the 95% interval as a band, the floor
as a line, fails and regressions marked in red, runs marked bad hollow; configs that dropped
first. One SVG path per band and line, so a year of nightly sweeps stays small.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from evalgate import page
from evalgate.history.look import ConfigHistory
from evalgate.history.record import StoredRun
from evalgate.page import esc

WIDTH = 720
HEIGHT = 120
PAD = 8
FAILED = frozenset({"fail", "regression"})


def _x(index: int, count: int) -> float:
    return PAD + (WIDTH - 2 * PAD) * (index / (count - 1) if count > 1 else 0.5)


def trend_svg(history: ConfigHistory) -> str:
    """One config's runs over time: band, line, floor, marks; axis labels at both ends."""
    scored = [(r, s) for r in history.runs if (s := r.headline) is not None]
    if not scored:
        return '<p class="note">no scored run</p>'
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
    xs = [f"{_x(i, count):.1f}" for i in range(count)]
    top = " ".join([f"{x},{base - s.high * per:.1f}" for x, s in zip(xs, scores, strict=True)])
    low = [f"{x},{base - s.low * per:.1f}" for x, s in zip(xs, scores, strict=True)]
    line = [f"{x},{base - s.value * per:.1f}" for x, s in zip(xs, scores, strict=True)]
    parts = [f'<path class="band" d="M{top} L{" ".join(low[::-1])} Z"/>']
    floors = [
        f"{x},{base - r.floor * per:.1f}"
        for x, r in zip(xs, runs, strict=True)
        if r.floor is not None
    ]
    if floors:
        parts.append(f'<polyline class="floor" points="{" ".join(floors)}"/>')
    parts.append(f'<polyline class="trend" points="{" ".join(line)}"/>')
    for i, run in enumerate(runs):
        kind = "marked" if run.marked else "failed" if run.verdict in FAILED else ""
        if kind:
            x, dot = line[i].split(",")
            word = "marked bad" if run.marked else run.verdict
            parts.append(
                f'<circle class="{kind}" cx="{x}" cy="{dot}" r="4">'
                f"<title>{esc(run.sweep)}: {esc(word)}</title></circle>"
            )
    ticks = "".join(
        f'<text class="tick" x="{WIDTH + 4}" y="{y(t) + 4:.1f}">{t:g}</text>' for t in scale.ticks()
    )
    label = (
        f"{history.name}: {count} runs from {runs[0].sweep} to {runs[-1].sweep}, "
        f"last {scores[-1].value:.3f}"
    )
    return (
        f'<svg class="trend" viewBox="0 0 {WIDTH + 40} {HEIGHT}" role="img" '
        f'aria-label="{esc(label)}"><title>{esc(label)}</title>{"".join(parts)}{ticks}</svg>'
        f'<div class="ends"><span>{esc(runs[0].sweep)}</span><span>{esc(runs[-1].sweep)}</span>'
        "</div>"
    )


def _latest(history: ConfigHistory) -> StoredRun:
    return history.runs[-1]


def _figure(history: ConfigHistory) -> str:
    last = _latest(history)
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
    floor = f"floor {last.floor:g} ({esc(last.floor_matched)})" if last.floor is not None else ""
    return (
        f'<figure class="trend tone-{tone}" data-dropped="{int(history.dropped)}">'
        f"<figcaption>{page.badge(word.upper(), tone)} {esc(history.name)} "
        f'<span class="note">{esc(history.labels.get("task", ""))}; last {esc(numbers)}; '
        f"{floor}; {esc(', '.join(notes))}</span></figcaption>"
        f"{trend_svg(history)}</figure>"
    )


def render(location: str, found: Sequence[ConfigHistory], where: Mapping[str, str]) -> str:
    """The whole page."""
    dropped = sum(1 for h in found if h.dropped)
    runs = sum(len(h.runs) for h in found)
    legend = (
        '<p class="legend">Each chart: the lowest filter\'s accuracy per recorded run (line) '
        "with its 95% interval (band); the floor (dashed); fails and regressions (red dots); "
        "runs marked bad (hollow). Configs that dropped come first.</p>"
    )
    body = [page.section("Accuracy over time", legend + "".join(map(_figure, found)))]
    filters = " ".join(f"{k}={v}" for k, v in where.items())
    return page.document(
        title="evalgate history",
        tone="fail" if dropped else "pass",
        summary=f"{len(found)} configs, {runs} runs, {dropped} dropped",
        counts=[("dropped", dropped, "fail"), ("steady", len(found) - dropped, "pass")],
        body=body,
        inputs=[("history", esc(location)), *([("where", esc(filters))] if filters else [])],
    )
