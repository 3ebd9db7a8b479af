"""The page's comparison with the baseline (--baseline): a second chart, then each regressed
config's lost questions (docs/verify.md, "Against the last good sweep", reports), as
templates/baseline.html shows them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from evalgate import page
from evalgate.compare.html import Bar, Differences, difference_chart
from evalgate.compare.paired import Finding
from evalgate.scrub import capped
from evalgate.verify.baseline_report import LISTED, standing
from evalgate.verify.records import BaselineSummary, Entry, Versus
from evalgate.verify.report import short_keys
from evalgate.verify.waivers import describe

SHOWN_CHARS = 120
"""Characters of an answer or question shown on the page; the rest is counted, not shown."""
LEGEND = (
    "Dot: the sweep's score minus the baseline's, in points, on the deciding filter over the "
    "paired questions; bar: its 95% interval; dashed line: the margin (--max-drop); thin line: "
    "no change. A REGRESSION is a drop significant after Holm's adjustment over every config "
    "compared, of at least half the margin; EQUIVALENT when the whole interval lies right of "
    "the margin."
)


def chart(entries: Sequence[Entry], summary: BaselineSummary) -> Differences:
    """Each compared config's difference and interval against the margin, the regressions
    first, then by their drop."""
    compared = sorted(
        (
            (e.versus.difference, i, e, e.versus)
            for i, e in enumerate(entries)
            if e.versus is not None and e.versus.difference is not None
        ),
        key=lambda t: (-Finding(t[3].standing).rank, t[0], t[1]),
    )
    margin = -summary.max_drop
    common, names = short_keys([entry for _, _, entry, _ in compared])
    bars = []
    for first, ((point, index, entry, versus), name) in enumerate(
        zip(compared, names, strict=True)
    ):
        data = {
            "first": first,
            "config": index,
            "margin": f"{point - margin:.6f}",
            "problem": int(versus.standing == "regression" and versus.waiver is None),
            **page.groups(entry.labels, entry.model),
        }
        tone = "warn" if versus.waiver is not None else page.tone(versus.standing)
        note = f"{versus.lost} lost, {versus.gained} gained of {versus.n}"
        line = page.Line(tone, standing(versus), name, note, data)
        interval = (versus.low or 0.0, versus.high or 0.0)
        bars.append(Bar(line, entry.key, versus.filter, point, interval))
    regressed = sum(1 for _, _, _, v in compared if v.standing == "regression")
    title = (
        f"Against the baseline: paired difference of {len(compared)} configs"
        f"{' of ' + common if common else ''} "
        f"({regressed} regression{'s' if regressed != 1 else ''}, listed first)"
    )
    return difference_chart(title, margin, bars, LEGEND)


class Lost(NamedTuple):
    """A regressed config's lost questions: the table's caption, whether the regression was
    waived (and how), and each question's doc_id, target, answers and text, cut to
    SHOWN_CHARS."""

    caption: str
    waived: str | None
    rows: list[tuple[int, list[str]]]


def _lost(entry: Entry, versus: Versus) -> Lost:
    rows = [
        (
            flip.doc_id,
            [
                capped(text, SHOWN_CHARS)
                for text in (
                    flip.target,
                    flip.baseline_answer,
                    flip.candidate_answer,
                    flip.question,
                )
            ],
        )
        for flip in versus.lost_questions
    ]
    shown = len(versus.lost_questions)
    more = f" (the first {shown} of {versus.lost})" if versus.lost > shown else ""
    waived = describe(versus.waiver) if versus.waiver is not None else None
    return Lost(f"Lost questions of {entry.key} on {versus.filter}{more}", waived, rows)


class Section(NamedTuple):
    """What the page says against the baseline: the chart, the regressions' lost questions,
    and the configs not compared (their standing, key and why)."""

    chart: Differences
    lost: list[Lost]
    listed: list[tuple[str, str, str]]


def section(entries: Sequence[Entry], summary: BaselineSummary) -> Section:
    listed = [
        (e.versus.standing.upper(), e.key, e.versus.reason)
        for e in entries
        if e.versus is not None and e.versus.standing in LISTED
    ]
    listed += [("MISSING", b.key, f"in the baseline: {b.path}") for b in summary.missing]
    lost = [
        _lost(e, e.versus)
        for e in entries
        if e.versus is not None and e.versus.standing == "regression"
    ]
    return Section(chart(entries, summary), lost, listed)
