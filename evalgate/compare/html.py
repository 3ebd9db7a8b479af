"""`evalgate compare --html`: the comparison as one self-contained page (templates/compare.html,
through evalgate.page).

What the page shows: docs/compare.md, "What it reports".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from evalgate import page
from evalgate.compare.comparison import Comparison, FilterComparison
from evalgate.compare.reason import points
from evalgate.compare.report import METHOD, changes, figures
from evalgate.compare.runs import format_doc_ids
from evalgate.page import Mark, Scale


def _percent(value: float) -> str:
    return f"{value * 100:.2f}%"


def _line(f: FilterComparison, note: str) -> page.Line:
    return page.Line(page.tone(f.finding.value), f.finding.name, f.filter, note)


class Move(NamedTuple):
    """A filter's row of the scores chart: its words, what the drawing says, the two scores."""

    line: page.Line
    described: str
    before: float
    after: float
    shown: tuple[str, str]


class Scores(NamedTuple):
    scale: Scale
    ticks: dict[float, str]
    moves: list[Move]


def _scores(c: Comparison) -> Scores:
    scale = Scale.around(
        v for f in c.filters for v in (f.counts.baseline_score, f.counts.candidate_score)
    )
    moves = []
    for f in c.filters:
        before, after = f.counts.baseline_score, f.counts.candidate_score
        described = (
            f"{f.filter}: baseline {_percent(before)}, candidate {_percent(after)} "
            f"over {f.counts.n} paired questions"
            if not f.counts.clustered
            else f"over {f.counts.n} paired answers to {f.counts.questions} questions, their "
            "repeats clustered"
        )
        line = _line(f, f"n={f.counts.n}")
        moves.append(Move(line, described, before, after, (_percent(before), _percent(after))))
    return Scores(scale, {t: f"{t * 100:g}%" for t in scale.ticks()}, moves)


class Bar(NamedTuple):
    """A paired difference to draw: its row's words, whose difference it is (and on which
    filter, when that is not the name), the difference and its 95% interval."""

    line: page.Line
    name: str
    filter: str | None
    difference: float
    interval: tuple[float, float]

    def described(self, margin: float) -> str:
        (low, high), point = self.interval, self.difference
        return (
            f"{self.name}: {points(point)} points"
            f"{f' on {self.filter}' if self.filter else ''}, 95% interval {points(low)} to "
            f"{points(high)}, margin {points(margin)}: {self.line.mark}"
        )

    @property
    def shown(self) -> tuple[str, str, str]:
        """The difference and its interval's ends, in points."""
        return points(self.difference), points(self.interval[0]), points(self.interval[1])


class Differences(NamedTuple):
    """Paired differences with their intervals against the margin and zero: compare's page, and
    verify's against its baseline (the macro `differences` of templates/charts.html)."""

    title: str
    margin: float
    scale: Scale
    ticks: dict[float, str]
    marks: list[Mark]
    bars: Sequence[Bar]
    legend: str


def difference_chart(title: str, margin: float, bars: Sequence[Bar], legend: str) -> Differences:
    marks = [Mark(margin, "margin"), Mark(0.0, "zero")]
    scale = Scale.around(
        [margin, 0.0, *(v for bar in bars for v in (*bar.interval, bar.difference))], floor=-1.0
    )
    ticks = {t: f"{t * 100:+g}" if t else "0" for t in scale.ticks()}
    return Differences(title, margin, scale, ticks, marks, bars, legend)


def _differences(c: Comparison) -> Differences:
    bars = [
        Bar(
            _line(f, f"{f.counts.lost} lost, {f.counts.gained} gained"),
            f.filter,
            None,
            f.counts.difference,
            f.interval,
        )
        for f in c.filters
    ]
    legend = (
        "Dot: the candidate's score minus the baseline's, in points, over the paired questions; "
        f"bar: its 95% interval; dashed line: the margin ({points(-c.max_drop)} points, "
        f"--max-drop {c.max_drop:g}); thin line: no change. Equivalent when the whole interval "
        "lies right of the margin; a regression when the drop is significant and beyond it."
    )
    return difference_chart("Paired difference against the margin", -c.max_drop, bars, legend)


class Statistics(NamedTuple):
    """A filter's row of the statistics table: its cells' texts (figures) with their sort keys."""

    filter: FilterComparison
    cells: list[tuple[str, object]]
    tone: page.Tone


def _statistics(c: Comparison) -> list[Statistics]:
    rows = []
    for f in c.filters:
        n = f.counts
        texts = list(figures(f))
        if n.clustered:
            texts[1] = f"{n.n} answers, {n.questions} questions"
        keys: list[object] = [None, n.n, n.baseline_score, n.candidate_score, n.difference]
        keys += [f.interval[0], n.lost, n.gained, f.p_value]
        cells = list(zip(texts[:-1], keys, strict=True))
        rows.append(Statistics(f, cells, page.tone(f.finding.value)))
    return rows


class Flips(NamedTuple):
    """A filter's flipped questions: listed, or the name of an earlier filter with the same."""

    title: str
    filter: FilterComparison
    same: str | None


def _flips(c: Comparison) -> list[Flips]:
    found: list[Flips] = []
    for f in c.filters:
        title = f"Flipped questions, {f.filter}: {f.counts.lost} lost, {f.counts.gained} gained"
        listed = (x.filter for x in found if x.same is None and x.filter.flips)
        same = next((e.filter for e in listed if e.flips == f.flips), None)
        found.append(Flips(title, f, same))
    return found


def render(comparison: Comparison) -> str:
    c = comparison
    return page.render(
        "compare.html",
        title=f"evalgate compare: {c.finding.name}",
        tone=page.tone(c.finding.value),
        summary=f"exit {int(c.exit_code)}: {c.reason}",
        counts=[],
        c=c,
        sides=(("baseline", c.baseline), ("candidate", c.candidate)),
        changed=changes(c.changed, "→"),
        scores=_scores(c),
        differences=_differences(c),
        statistics=_statistics(c),
        left_out=[(side, ids, format_doc_ids(ids)) for side, ids in c.failed.items() if ids],
        unpaired=format_doc_ids(c.unpaired),
        flips=_flips(c),
        method=METHOD,
    )
