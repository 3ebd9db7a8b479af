"""`evalgate compare --html`: the comparison as one self-contained page (evalgate.page).

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
from evalgate.page import Mark, Scale, esc


def _percent(value: float) -> str:
    return f"{value * 100:.2f}%"


def _line(f: FilterComparison, note: str) -> page.Line:
    return page.Line(page.tone(f.finding.value), f.finding.name, f.filter, note)


def _scores(c: Comparison) -> str:
    scale = Scale.around(
        v for f in c.filters for v in (f.counts.baseline_score, f.counts.candidate_score)
    )
    rows = []
    for f in c.filters:
        before, after = f.counts.baseline_score, f.counts.candidate_score
        described = (
            f"{f.filter}: baseline {_percent(before)}, candidate {_percent(after)} "
            f"over {f.counts.n} paired questions"
            if not f.counts.clustered
            else f"over {f.counts.n} paired answers to {f.counts.questions} questions, their "
            "repeats clustered"
        )
        rows.append(
            page.chart_row(
                _line(f, f"n={f.counts.n}"),
                page.interval_svg(scale, point=after, start=before, label=described),
                f"{_percent(before)} &#8594; <b>{_percent(after)}</b>",
            )
        )
    axis = page.axis_svg(scale, {t: f"{t * 100:g}%" for t in scale.ticks()})
    legend = "Hollow dot: the baseline's score; filled dot: the candidate's, on the same questions."
    return page.chart("Scores, baseline to candidate", axis, rows, legend=legend)


class Bar(NamedTuple):
    """A paired difference to draw: its row's words, whose difference it is (and on which
    filter, when that is not the name), the difference and its 95% interval."""

    line: page.Line
    name: str
    filter: str | None
    difference: float
    interval: tuple[float, float]


def difference_chart(title: str, margin: float, bars: Sequence[Bar], legend: str) -> str:
    """Paired differences with their intervals against the margin and zero: compare's page, and
    verify's against its baseline."""
    marks = [Mark(margin, "margin"), Mark(0.0, "zero")]
    scale = Scale.around(
        [margin, 0.0, *(v for bar in bars for v in (*bar.interval, bar.difference))], floor=-1.0
    )
    rows = []
    for bar in bars:
        (low, high), point = bar.interval, bar.difference
        described = (
            f"{bar.name}: {points(point)} points{f' on {bar.filter}' if bar.filter else ''}, "
            f"95% interval {points(low)} to {points(high)}, margin {points(margin)}: "
            f"{bar.line.mark}"
        )
        drawing = page.interval_svg(
            scale, point=point, low=low, high=high, marks=marks, label=described
        )
        numbers = f"<b>{points(point)}</b> [{points(low)}, {points(high)}] pts"
        rows.append(page.chart_row(bar.line, drawing, numbers))
    axis = page.axis_svg(scale, {t: f"{t * 100:+g}" if t else "0" for t in scale.ticks()}, marks)
    return page.chart(title, axis, rows, legend=legend)


def _differences(c: Comparison) -> str:
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


def _statistics(c: Comparison) -> str:
    rows = []
    for f in c.filters:
        n = f.counts
        texts = [esc(text) for text in figures(f)]
        if n.clustered:
            texts[1] = esc(f"{n.n} answers, {n.questions} questions")
        texts[-1] = page.badge(f.finding.name, page.tone(f.finding.value))
        keys: list[object] = [None, n.n, n.baseline_score, n.candidate_score, n.difference]
        keys += [f.interval[0], n.lost, n.gained, f.p_value, f.finding.rank]
        rows.append(page.Row(list(zip(texts, keys, strict=True)), esc(f.reason)))
    headers = ["Filter", "n", "Baseline", "Candidate", "Diff (pts)", "95% CI (pts)"]
    return page.table([*headers, "Lost", "Gained", "McNemar p", "Verdict"], rows)


def _protocol(c: Comparison) -> str:
    parts = []
    if c.drift:
        parts.append(
            "<p>The runs were not measured the same way (compared anyway: "
            "<code>--allow-protocol-drift</code>); a difference in score may come from these:</p>"
            + page.table(
                ["Field", "Baseline", "Candidate"],
                [
                    page.Row([esc(d.field), esc(d.baseline), esc(d.candidate)], esc(d.detail))
                    for d in c.drift
                ],
            )
        )
    else:
        parts.append("<p>None: both runs were measured the same way.</p>")
    left_out = [
        f"request failed in the {side} run: {len(ids)} ({esc(format_doc_ids(ids))})"
        for side, ids in c.failed.items()
        if ids
    ]
    if c.unpaired:
        left_out.append(
            f"question text differs: {len(c.unpaired)} ({esc(format_doc_ids(c.unpaired))})"
        )
    if left_out:
        parts.append("<p>Questions left out of the pairing: " + "; ".join(left_out) + ".</p>")
    parts += [f'<p class="tone-warn">warning: {esc(w)}</p>' for w in c.warnings]
    return "".join(parts)


def _flip_sections(c: Comparison) -> list[str]:
    sections: list[str] = []
    shown: list[FilterComparison] = []
    for f in c.filters:
        lost, gained = f.counts.lost, f.counts.gained
        title = f"Flipped questions, {f.filter}: {lost} lost, {gained} gained"
        same = next((e.filter for e in shown if e.flips == f.flips), None)
        if not f.flips:
            content = "<p>None: every paired question was answered alike by both runs.</p>"
        elif same is not None:
            content = f"<p>The same questions as {esc(same)}.</p>"
        else:
            rows = [
                page.Row(
                    [
                        (esc(x.doc_id), x.doc_id),
                        page.badge(x.change.upper(), "fail" if x.change == "lost" else "pass"),
                        *(esc(text) for text in (x.target, x.baseline_answer, x.candidate_answer)),
                    ],
                    esc(x.question),
                )
                for x in f.flips
            ]
            headers = ["doc_id", "Change", "Target", "Baseline answer", "Candidate answer"]
            content = page.table(headers, rows)
            shown.append(f)
        sections.append(page.section(title, content))
    return sections


def render(comparison: Comparison) -> str:
    c = comparison
    sides = (("baseline", c.baseline), ("candidate", c.candidate))
    rows = [
        page.Row(
            [esc(side), f"<code>{esc(run.path)}</code>"]
            + [esc(text) for text in (run.run_id, run.model or "-", run.status)],
            esc(", ".join(f"{k}={v}" for k, v in run.labels.items() if v is not None)),
        )
        for side, run in sides
    ]
    runs = page.table(["Run", "Folder", "Run id", "Model", "Status"], rows)
    if c.changed:
        runs += f"<p>Changed: {esc(changes(c.changed, '→'))}</p>"
    inputs = [
        *((side, f"<code>{esc(run.path)}</code> (run {esc(run.run_id)})") for side, run in sides),
        ("margin", f"--max-drop {c.max_drop:g} ({c.max_drop * 100:.1f} points)"),
        *((name, esc(text)) for name, text in METHOD.items()),
    ]
    return page.document(
        title=f"evalgate compare: {c.finding.name}",
        tone=page.tone(c.finding.value),
        summary=f"exit {int(c.exit_code)}: {c.reason}",
        body=[
            page.section("Runs", runs),
            page.section("Scores", _scores(c) + _differences(c) + _statistics(c)),
            page.section("Protocol", _protocol(c)),
            *_flip_sections(c),
        ],
        inputs=inputs,
    )
