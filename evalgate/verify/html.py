"""`evalgate verify --html`: the sweep's verdict as one self-contained page (templates/verify.html,
through evalgate.templates), the problems first (docs/verify.md, "Outputs"); with --baseline, a
second chart, then each regressed config's lost questions (templates/baseline.html).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import NamedTuple

import msgspec

from evalgate import templates
from evalgate.compare.paired import Finding
from evalgate.compare.views import Bar, Differences, difference_chart
from evalgate.scrub import capped
from evalgate.templates import Mark, Scale
from evalgate.verify.records import OUTCOMES, Baseline, CheckRow, Entry, Versus
from evalgate.verify.report import LISTED, deciding, rank, short_keys, standing
from evalgate.verify.sweep import Report
from evalgate.verify.waivers import describe

MAX_CHART_ROWS = 500
"""Rows drawn per chart; a bigger sweep draws its problems first, then the configs nearest
their threshold (the table below the charts always lists every config)."""


def outcome_in_chart(entry: Entry, check: CheckRow | None) -> str:
    """A row's outcome in one task's chart: its check's, when the entry's outcome came from
    its checks (another task's score may be the one that failed); else the entry's (a run
    that failed for a reason other than its scores, an error, a missing config)."""
    if check is not None and any(c.outcome == entry.outcome for c in entry.checks):
        return check.outcome
    return entry.outcome


class _Config(msgspec.Struct, frozen=True):
    """An entry in one task's chart: its place in the report, the check drawn, its outcome."""

    index: int
    entry: Entry
    check: CheckRow | None
    outcome: str


class Row(NamedTuple):
    """A chart's row: its words, the check drawn (None: no score) with its threshold, and what
    the drawing says (or, with no score, why there is none)."""

    line: templates.Line
    check: CheckRow | None
    described: str
    marks: list[Mark]


class Chart(NamedTuple):
    title: str
    scale: Scale
    ticks: dict[float, str]
    marks: list[Mark]
    """Drawn across the axis: the threshold, when every row has the same."""
    rows: list[Row]
    legend: str


def _row(config: _Config, label: str, first: int) -> Row:
    entry, check, outcome = config.entry, config.check, config.outcome
    data = {
        "first": first,
        "config": config.index,
        "margin": "-1e9" if check is None else f"{check.value - check.threshold:.6f}",
        "problem": int(outcome != "pass"),
        **templates.groups(entry.labels, entry.model),
    }
    line = templates.Line(templates.tone(outcome), outcome.upper(), label, data=data)
    if check is None:
        return Row(line, None, f"{outcome}: {entry.reason}", [])
    described = (
        f"{entry.key}: deciding filter {check.filter} {check.value:.4f}, 95% interval "
        f"{check.low:.4f} to {check.high:.4f}, threshold {check.threshold:.4f} "
        f"({check.matched}): {outcome}"
    )
    return Row(line, check, described, [Mark(check.threshold, "threshold")])


def _configs(n: int) -> str:
    return f"{n} config" if n == 1 else f"{n} configs"


def _nearest(line: _Config) -> tuple[int, float]:
    margin = line.check.value - line.check.threshold if line.check else -math.inf
    return rank(line.outcome), margin


def _chart(report: Report, task: str | None, lines: list[_Config]) -> Chart:
    total = len(lines)
    if total > MAX_CHART_ROWS:  # the problems, then the passes nearest their threshold
        lines = sorted(lines, key=_nearest)[:MAX_CHART_ROWS]
    checks = [line.check for line in lines if line.check is not None]
    scale = Scale.around([v for c in checks for v in (c.low, c.high, c.threshold)])
    thresholds = sorted({c.threshold for c in checks})
    marks = [Mark(t, "threshold") for t in thresholds] if len(thresholds) == 1 else []
    lines = sorted(lines, key=lambda line: (rank(line.outcome), line.index))
    common, labels = short_keys([line.entry for line in lines], report.paths)
    rows = [
        _row(line, label, first)
        for first, (line, label) in enumerate(zip(lines, labels, strict=True))
    ]
    problems = sum(1 for line in lines if line.outcome != "pass")
    title = (
        f"{task}{': ' + common if common else ''}: exact_match of {_configs(total)} "
        f"({problems} with a problem, listed first)"
        if task is not None
        else f"{_configs(total)} without a score"
    )
    legend = LEGEND
    if total > len(lines):
        legend = (
            f"Drawn: {len(lines)} of the {total} configs, the problems first, then those "
            "nearest their threshold; the table below lists every one. " + LEGEND
        )
    return Chart(title, scale, {t: f"{t:.2f}" for t in scale.ticks()}, marks, rows, legend)


def charts(report: Report) -> list[Chart]:
    """One chart per task; the rows with no score go to the first."""
    entries = list(enumerate(report.entries))
    tasks = list(dict.fromkeys(c.task for _, e in entries for c in e.checks))
    unscored = [_Config(i, e, None, e.outcome) for i, e in entries if not e.checks]
    if not tasks:
        return [_chart(report, None, unscored)]
    out = []
    for number, task in enumerate(tasks):
        lines = [
            _Config(i, e, check, outcome_in_chart(e, check))
            for i, e in entries
            if (check := deciding(c for c in e.checks if c.task == task)) is not None
        ]
        out.append(_chart(report, task, lines + (unscored if number == 0 else [])))
    return out


LEGEND = (
    "Dot: the score of the deciding filter (the failing one, else the one nearest its "
    "threshold); bar: its 95% Wilson interval; dashed line: the config's threshold. "
    "A config fails below its threshold and is inconclusive when its interval straddles it "
    "on too small a sample."
)


class Listed(NamedTuple):
    """A config in the table: its place in the report, its outcome's rank, the deciding check,
    its label values (templates.GROUPS)."""

    place: int
    rank: int
    tone: templates.Tone
    entry: Entry
    check: CheckRow | None
    groups: dict[str, str]


def listed(report: Report) -> list[Listed]:
    """Every config, problems first."""
    return [
        Listed(
            i,
            rank(e.outcome),
            templates.tone(e.outcome),
            e,
            deciding(e.checks),
            templates.groups(e.labels, e.model),
        )
        for i, e in sorted(enumerate(report.entries), key=lambda p: (rank(p[1].outcome), p[0]))
    ]


def render(report: Report) -> str:
    return templates.render_page(
        "verify.html",
        title=f"evalgate verify: {report.verdict.upper()}",
        tone=templates.tone(report.verdict),
        summary=f"exit {report.exit_code}: {report.reason}",
        counts=[(o, report.count(o), templates.tone(o)) for o in OUTCOMES],
        report=report,
        groups=templates.GROUPS,
        charts=charts(report),
        listed=listed(report),
        baseline=section(report.entries, report.baseline) if report.baseline else None,
    )


# The comparison with the baseline (docs/verify.md, "Against the last good sweep", reports).

SHOWN_CHARS = 120
"""Characters of an answer or question shown on the page; the rest is counted, not shown."""
BASELINE_LEGEND = (
    "Dot: the sweep's score minus the baseline's, in points, on the deciding filter over the "
    "paired questions; bar: its 95% interval; dashed line: the margin (--max-drop); thin line: "
    "no change. A REGRESSION is a drop significant after Holm's adjustment over every config "
    "compared, of at least half the margin; EQUIVALENT when the whole interval lies right of "
    "the margin."
)


def chart(entries: Sequence[Entry], summary: Baseline) -> Differences:
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
            **templates.groups(entry.labels, entry.model),
        }
        tone = "warn" if versus.waiver is not None else templates.tone(versus.standing)
        note = f"{versus.lost} lost, {versus.gained} gained of {versus.n}"
        line = templates.Line(tone, standing(versus), name, note, data)
        interval = (versus.low or 0.0, versus.high or 0.0)
        bars.append(Bar(line, entry.key, versus.filter, point, interval))
    regressed = sum(1 for _, _, _, v in compared if v.standing == "regression")
    title = (
        f"Against the baseline: paired difference of {len(compared)} configs"
        f"{' of ' + common if common else ''} "
        f"({regressed} regression{'s' if regressed != 1 else ''}, listed first)"
    )
    return difference_chart(title, margin, bars, BASELINE_LEGEND)


class Lost(NamedTuple):
    """A regressed config's lost questions: the table's caption, whether the regression was
    waived (and how), and each question's doc_id, target, answers and text, cut to
    SHOWN_CHARS."""

    caption: str
    waived: str | None
    rows: list[tuple[int, list[str]]]


_TEXTS = operator.attrgetter("target", "baseline_answer", "candidate_answer", "question")


def _lost(entry: Entry, versus: Versus) -> Lost:
    rows = [(q.doc_id, [capped(t, SHOWN_CHARS) for t in _TEXTS(q)]) for q in versus.lost_questions]
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


def section(entries: Sequence[Entry], summary: Baseline) -> Section:
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
