"""The page's comparison with the baseline (--baseline): a second chart, each config's paired
difference and its 95% interval against the margin, the regressions first; then, per regressed
config, the questions it lost. Every outside text goes through evalgate.page.esc (outside.html),
answers and questions capped (baseline_report.SHOWN_CHARS).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from evalgate import page
from evalgate.page import Mark, Scale, esc
from evalgate.verify.baseline_report import LISTED, lost_questions, points, standing
from evalgate.verify.records import BaselineSummary, Entry, Versus
from evalgate.verify.report import short_keys
from evalgate.verify.waivers import describe

ORDER = ("regression", "inconclusive", "equivalent", "improved")
TONES: Mapping[str, page.Tone] = {
    "regression": "fail",
    "inconclusive": "warn",
    "equivalent": "pass",
    "improved": "pass",
}
LEGEND = (
    "Dot: the sweep's score minus the baseline's, in points, on the deciding filter over the "
    "paired questions; bar: its 95% interval; dashed line: the margin (--max-drop); thin line: "
    "no change. A REGRESSION is a drop significant after Holm's adjustment over every config "
    "compared, of at least half the margin; EQUIVALENT when the whole interval lies right of "
    "the margin."
)


def _compared(entries: Sequence[Entry]) -> list[tuple[int, Entry, Versus]]:
    """The configs compared, regressions first, then by their drop."""
    found = [
        (i, e, e.versus)
        for i, e in enumerate(entries)
        if e.versus is not None and e.versus.difference is not None
    ]
    return sorted(found, key=lambda t: (ORDER.index(t[2].standing), t[2].difference or 0.0, t[0]))


def _row(
    place: tuple[int, int, str], entry: Entry, versus: Versus, scale: Scale, margin: float
) -> str:
    """A config's row; `place`: its index in the report, its place in the chart, its label."""
    index, first, name = place
    low, high, point = versus.low or 0.0, versus.high or 0.0, versus.difference or 0.0
    marks = [Mark(margin, "margin"), Mark(0.0, "zero")]
    label = standing(versus)
    described = (
        f"{entry.key}: {points(point)} points on {versus.filter}, 95% interval {points(low)} "
        f"to {points(high)}, margin {points(margin)}: {label}"
    )
    labels = entry.labels or {}
    data = {
        "first": first,
        "config": index,
        "margin": f"{point - margin:.6f}",
        "problem": int(versus.standing == "regression" and versus.waiver is None),
        "model": str(labels.get("model_prefix") or entry.model),
        **{k: str(labels.get(k)) for k in ("hardware", "framework", "precision", "concurrency")},
    }
    tone = "warn" if versus.waiver is not None else TONES[versus.standing]
    return page.chart_row(
        tone=tone,
        mark=label,
        label=name,
        note=f"{versus.lost} lost, {versus.gained} gained of {versus.n}",
        drawing=page.interval_svg(
            scale, point=point, low=low, high=high, marks=marks, label=described
        ),
        numbers=f"<b>{points(point)}</b> [{points(low)}, {points(high)}] pts",
        data=data,
    )


def chart(entries: Sequence[Entry], summary: BaselineSummary) -> str:
    """Each compared config's difference and interval against the margin."""
    compared = _compared(entries)
    margin = -summary.max_drop
    values = [v for _, _, x in compared for v in (x.low or 0.0, x.high or 0.0)]
    scale = Scale.around([margin, 0.0, *values], floor=-1.0)
    axis = page.axis_svg(
        scale,
        {t: f"{t * 100:+g}" if t else "0" for t in scale.ticks()},
        [Mark(margin, "margin"), Mark(0.0, "zero")],
    )
    common, names = short_keys([entry for _, entry, _ in compared])
    rows = [
        _row((index, first, name), entry, versus, scale, margin)
        for first, ((index, entry, versus), name) in enumerate(zip(compared, names, strict=True))
    ]
    regressed = sum(1 for _, _, v in compared if v.standing == "regression")
    title = (
        f"Against the baseline: paired difference of {len(compared)} configs"
        f"{' of ' + common if common else ''} "
        f"({regressed} regression{'s' if regressed != 1 else ''}, listed first)"
    )
    return page.chart(title, axis, rows, legend=LEGEND)


def _lost(entry: Entry, versus: Versus) -> str:
    rows = [
        page.Row(
            [(esc(doc_id), doc_id), esc(target), esc(before), esc(after)],
            esc(question),
        )
        for doc_id, question, target, before, after in lost_questions(versus)
    ]
    shown = len(versus.lost_questions)
    more = f" (the first {shown} of {versus.lost})" if versus.lost > shown else ""
    waived = f" ({esc(describe(versus.waiver))})" if versus.waiver is not None else ""
    caption = f"Lost questions of {entry.key} on {versus.filter}{more}"
    table = page.table(["doc_id", "Target", "Baseline's answer", "This sweep's answer"], rows)
    return f"<h3>{esc(caption)}{waived}</h3>{table}"


def _listed(entries: Sequence[Entry], summary: BaselineSummary) -> str:
    rows = [
        page.Row([page.badge(e.versus.standing.upper(), "info"), esc(e.key)], esc(e.versus.reason))
        for e in entries
        if e.versus is not None and e.versus.standing in LISTED
    ]
    rows += [
        page.Row([page.badge("MISSING", "info"), esc(b.key)], esc(f"in the baseline: {b.path}"))
        for b in summary.missing
    ]
    return page.table(["Not compared", "Config"], rows) if rows else ""


def section(entries: Sequence[Entry], summary: BaselineSummary) -> str:
    """The page's section on the baseline: the chart, the lost questions, what was not
    compared."""
    regressed = [
        (e, e.versus) for e in entries if e.versus is not None and e.versus.standing == "regression"
    ]
    parts = [chart(entries, summary)]
    parts += [_lost(e, v) for e, v in regressed]
    parts.append(_listed(entries, summary))
    return page.section("Against the baseline", "".join(parts))
