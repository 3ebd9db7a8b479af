"""`evalgate verify --html`: the sweep's verdict as one self-contained page (evalgate.page), the
problems first (docs/verify.md, "Outputs").
"""

from __future__ import annotations

import math

import msgspec

from evalgate import page
from evalgate.page import Mark, Scale, esc
from evalgate.verify.baseline_html import section
from evalgate.verify.records import OUTCOMES, CheckRow, Entry
from evalgate.verify.report import deciding, rank, short_keys
from evalgate.verify.sweep import Report

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


def _row(config: _Config, label: str, first: int, scale: Scale) -> str:
    entry, check, outcome = config.entry, config.check, config.outcome
    data = {
        "first": first,
        "config": config.index,
        "margin": "-1e9" if check is None else f"{check.value - check.threshold:.6f}",
        "problem": int(outcome != "pass"),
        **page.groups(entry.labels, entry.model),
    }
    line = page.Line(page.tone(outcome), outcome.upper(), label, data=data)
    if check is None:
        why = esc(f"{outcome}: {entry.reason}")  # the drawing's place, saying why it is empty
        return page.chart_row(
            line, f'<span class="bar empty" title="{why}">{why}</span>', "no score"
        )
    described = (
        f"{entry.key}: deciding filter {check.filter} {check.value:.4f}, 95% interval "
        f"{check.low:.4f} to {check.high:.4f}, threshold {check.threshold:.4f} "
        f"({check.matched}): {outcome}"
    )
    drawing = page.interval_svg(
        scale,
        point=check.value,
        low=check.low,
        high=check.high,
        marks=[Mark(check.threshold, "threshold")],
        label=described,
    )
    numbers = (
        f"<b>{check.value:.4f}</b> [{check.low:.4f}, {check.high:.4f}] "
        f'<span class="thr">thr {check.threshold:.4f}</span>'
    )
    return page.chart_row(line, drawing, numbers)


def _configs(n: int) -> str:
    return f"{n} config" if n == 1 else f"{n} configs"


def _nearest(line: _Config) -> tuple[int, float]:
    margin = line.check.value - line.check.threshold if line.check else -math.inf
    return rank(line.outcome), margin


def _chart(report: Report, task: str | None, lines: list[_Config]) -> str:
    total = len(lines)
    if total > MAX_CHART_ROWS:  # the problems, then the passes nearest their threshold
        lines = sorted(lines, key=_nearest)[:MAX_CHART_ROWS]
    checks = [line.check for line in lines if line.check is not None]
    scale = Scale.around([v for c in checks for v in (c.low, c.high, c.threshold)])
    thresholds = sorted({c.threshold for c in checks})
    marks = [Mark(t, "threshold") for t in thresholds] if len(thresholds) == 1 else []
    axis = page.axis_svg(scale, {t: f"{t:.2f}" for t in scale.ticks()}, marks)
    lines = sorted(lines, key=lambda line: (rank(line.outcome), line.index))
    common, labels = short_keys([line.entry for line in lines], report.paths)
    rows = [
        _row(line, label, first, scale)
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
    return page.chart(title, axis, rows, legend=legend)


def charts(report: Report) -> list[str]:
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


_GROUPS = "".join(f'<option value="{g}">{g}</option>' for g in page.GROUPS)
CONTROLS = (
    '<div class="controls"><label>Group by <select id="group-by">'
    f'<option value="">nothing</option>{_GROUPS}</select></label>'
    '<label>Order <select id="order-by"><option value="first">problems first</option>'
    '<option value="margin">nearest the threshold</option>'
    '<option value="config">by config</option></select></label></div>'
)


def _table(report: Report) -> str:
    headers = [
        "Outcome",
        "Config",
        *(g.capitalize() for g in page.GROUPS[:4]),
        "Conc",
        "Filter",
        "Score",
        "95% CI",
        "n",
        "Threshold",
    ]
    rows = []
    for i, entry in sorted(enumerate(report.entries), key=lambda p: (rank(p[1].outcome), p[0])):
        check = deciding(entry.checks)
        dims = page.groups(entry.labels, entry.model)
        score: list[page.Cell] = (
            [
                esc(check.filter),
                (f'<span class="num">{check.value:.4f}</span>', check.value),
                (f'<span class="num">{check.low:.4f}&#8211;{check.high:.4f}</span>', check.low),
                (f'<span class="num">{check.n}</span>', check.n),
                (
                    f'<span class="num">{check.threshold:.4f}</span> {esc(check.matched)}',
                    check.threshold,
                ),
            ]
            if check is not None
            else ["-", ("-", -1), ("-", -1), ("-", -1), ("-", -1)]
        )
        where = f' <span class="path">{esc(entry.path)}</span>' if entry.path else ""
        cells: list[page.Cell] = [
            (page.badge(entry.outcome.upper(), page.tone(entry.outcome)), rank(entry.outcome)),
            (esc(entry.key), i),
            *(esc(dims[g]) for g in page.GROUPS),
            *score,
        ]
        rows.append(page.Row(cells, esc(entry.reason) + where))
    return page.table(headers, rows)


def _inputs(report: Report) -> list[tuple[str, str]]:
    expect = report.expectation
    wanted = "none"
    if expect is not None:
        wanted = esc(f"--expect {expect.source}: {expect.count or len(expect.configs)} configs")
    inputs = [
        ("results", "<br>".join(f"<code>{esc(p)}</code>" for p in report.paths)),
        ("thresholds", f"<code>{esc(report.thresholds_file)}</code>"),
        ("expected set", wanted),
        (
            "min samples",
            esc("as each run recorded" if report.min_samples is None else report.min_samples),
        ),
    ]
    if report.baseline is not None:
        listed = "<br>".join(f"<code>{esc(p)}</code>" for p in report.baseline.paths)
        inputs.append(("baseline", f"{listed} (margin {report.baseline.max_drop:g})"))
    if report.ignored:
        listed = "<br>".join(f"<code>{esc(n.path)}</code>: {esc(n.reason)}" for n in report.ignored)
        inputs.append((f"ignored ({len(report.ignored)})", listed))
    return inputs


def render(report: Report) -> str:
    sections = [
        page.section("Scores against thresholds", CONTROLS + "".join(charts(report))),
        page.section(f"Every config ({len(report.entries)})", _table(report)),
    ]
    if report.baseline is not None:
        sections.insert(1, section(report.entries, report.baseline))
    return page.document(
        title=f"evalgate verify: {report.verdict.upper()}",
        tone=page.tone(report.verdict),
        summary=f"exit {report.exit_code}: {report.reason}",
        counts=[(o, report.count(o), page.tone(o)) for o in OUTCOMES],
        body=sections,
        inputs=_inputs(report),
    )
