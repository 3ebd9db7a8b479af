"""The forms a sweep's verdict takes: a terminal table, a GitHub job summary (templates/summary.md)
and annotations, JUnit XML (templates/junit.xml, one testcase per config), each a string, with
the comparison with the baseline (--baseline) in each; every text a result file gave is made
safe for its form as it is placed (evalgate.templates, evalgate.scrub; docs/verify.md, "Outputs").
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, NamedTuple

from evalgate import scrub, templates
from evalgate.compare.comparison import points
from evalgate.templates import Said, line
from evalgate.verify.records import FAILING, OUTCOMES, Baseline, CheckRow, Entry, Versus
from evalgate.verify.sweep import Report
from evalgate.verify.waivers import describe

if TYPE_CHECKING:
    from evalgate.templates import Scale

MARKS = {
    "pass": "✅",
    "fail": "❌",
    "inconclusive": "⚠️",
    "error": "💥",
    "malformed": "🧩",
    "missing": "❓",
    "unexpected": "🆕",
    "duplicate": "♊",
    "empty": "∅",
    "regression": "📉",
    "expired": "⌛",
}
MAX_ANNOTATIONS = 10
"""GitHub shows at most 10 error and 10 warning annotations per step."""
MAX_SUMMARY_ROWS = 1000
"""Rows listed per table of the job summary; the rest are counted, not listed."""
SUMMARY_BYTES = 1024 * 1024
"""GitHub's cap on one step's job summary (1 MiB): past it, the summary is not shown at all,
so the tables are shortened until the summary fits."""
MAX_CHART_BARS = 40
"""Configs drawn per chart in the job summary: the problems first, then those nearest their
threshold (every config stays in the table)."""


_DECIDING_FIRST = {"fail": 0, "inconclusive": 1, "pass": 2}


def deciding(checks: Iterable[CheckRow]) -> CheckRow | None:
    """The check that decides: the failing one, else the one nearest its threshold."""
    return min(
        checks, key=lambda c: (_DECIDING_FIRST[c.outcome], c.value - c.threshold), default=None
    )


def rank(outcome: str) -> int:
    """Problems first (in the order OUTCOMES lists them), inconclusive next, passes last."""
    index = OUTCOMES.index(outcome)
    return index if outcome in FAILING else len(OUTCOMES) + (outcome == "pass")


def short_keys(entries: Sequence[Entry], roots: Sequence[str] = ()) -> tuple[str, list[str]]:
    """The words every labelled config's key shares, and each key without them (a key that is
    a path, for a file with no config, is shown relative to the root it was found under)."""
    labelled = [e.key.split() for e in entries if e.labels is not None]
    common = (
        [w for w in labelled[0] if all(w in words for words in labelled)]
        if len(labelled) > 1
        else []
    )
    shorts = []
    for entry in entries:
        if entry.labels is None:
            root = next((r for r in roots if entry.key.startswith(r.rstrip("/") + "/")), None)
            shorts.append(entry.key[len(root.rstrip("/")) + 1 :] if root else entry.key)
        else:
            shorts.append(" ".join(w for w in entry.key.split() if w not in common) or entry.key)
    return " ".join(common), shorts


def _cells(entry: Entry) -> list[str]:
    """The table's row, each cell a safe terminal line: outcome, config, and the deciding check
    (score, interval, n, threshold)."""
    cells = [entry.outcome.upper(), line("{}", entry.key)]
    check = deciding(entry.checks)
    if check is None:
        return [*cells, "-", "-", "-", "-"]
    stderr = f" ±{check.stderr:.4f}" if check.stderr is not None else ""
    return [
        *cells,
        line("{:.4f}{} {}", check.value, stderr, check.filter),
        f"[{check.low:.4f}, {check.high:.4f}]",
        str(check.n),
        line("{:.2f} {}", check.threshold, check.matched),
    ]


HEADER = ["RESULT", "CONFIG", "SCORE (deciding filter)", "95% CI", "N", "THRESHOLD"]


def _columns(report: Report) -> tuple[list[str], Callable[[Entry], list[str]]]:
    """The table's header and row maker: with --baseline, two columns more (the finding
    against the baseline, the paired difference and its interval)."""
    if report.baseline is None:
        return HEADER, _cells
    return [*HEADER, *BASELINE_HEADER], lambda entry: [
        *_cells(entry),
        standing(entry.versus),
        line("{}", difference(entry.versus)),  # names a filter: outside text
    ]


def terminal_lines(report: Report, *, quiet: bool = False) -> Iterator[str]:
    """terminal()'s lines but the verdict, each ending in a newline, made as they are written
    (the rows are made once to measure the columns and again to print: a sweep's whole table
    is never held)."""
    # the table's rows: the results gated (not problems with the set), none with --quiet
    gated = () if quiet else ("pass", "fail", "inconclusive", "error", "regression")
    results = [e for e in report.entries if e.source is not None and e.outcome in gated]
    header, shown = _columns(report)
    if results:
        widths = [len(h) for h in header]
        for row in map(shown, results):
            widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
        widths[0] = len("INCONCLUSIVE")  # the same layout whatever the outcomes
        columns = "  ".join(f"{{:<{w}}}" for w in widths).format
        for row in itertools.chain([header], map(shown, results)):
            yield columns(*row).rstrip() + "\n"
        yield "\n"
    problems = [e for e in report.entries if e.outcome != "pass"]
    if problems:
        yield "Problems:\n"
        for entry in problems:
            yield line("  {:<12} {}\n", entry.outcome.upper(), entry.key)
            yield line("  {:<12} {}\n", "", entry.reason)
            if entry.path and entry.path != entry.key:
                yield line("  {:<12} {}\n", "", entry.path)
        yield "\n"
    if report.baseline is not None:
        found = findings(report.entries, report.baseline)
        yield from (line(said.text + "\n", *said.values) for said in found)
        yield "\n"
    for note in report.ignored:
        yield line("ignored: {}\n", note.reason)


def verdict_line(report: Report, unwritten: Sequence[str] = ()) -> str:
    """The line printed last: the verdict, its exit code, and each report asked for that could
    not be written (the exit code stays the verdict's: docs/verify.md)."""
    verdict = f"{report.verdict.upper()} (exit {report.exit_code})"
    missing = ", ".join(["{}"] * len(unwritten))
    missing = f"; not written (see above): {missing}" if unwritten else ""
    return line(f"evalgate verify: {verdict}: {{}}{missing}\n", report.reason, *unwritten)


def terminal(report: Report, *, quiet: bool = False) -> str:
    """The table of results, every problem with its reason and path, and the verdict line."""
    return "".join(terminal_lines(report, quiet=quiet)) + verdict_line(report)


class Chart(NamedTuple):
    """A task's chart in the job summary: mermaid's xychart, a bar per config."""

    task: str
    names: list[str]
    common: str
    scale: Scale
    values: str
    thresholds: str
    which: str


def charts(report: Report) -> list[Chart]:
    """A chart per task that GitHub draws itself (mermaid's xychart): each config's deciding
    score as a bar, its threshold as a line; at most MAX_CHART_BARS configs, problems first."""
    from evalgate.templates import Scale  # the HTML page's module: only the chart needs it

    found = []
    tasks = dict.fromkeys(c.task for e in report.entries for c in e.checks)
    for task in tasks:
        scored = [
            (e, c)
            for e in report.entries
            if (c := deciding(x for x in e.checks if x.task == task)) is not None
        ]
        scored.sort(key=lambda p: (rank(p[0].outcome), p[1].value - p[1].threshold))
        shown = scored[:MAX_CHART_BARS]
        common, names = short_keys([e for e, _ in shown], report.paths)
        scale = Scale.around(v for _, c in shown for v in (c.value, c.threshold))
        which = (
            f"{len(shown)} of {len(scored)} configs: the problems, then those nearest their "
            "threshold"
            if len(scored) > len(shown)
            else f"{len(shown)} configs"
        )
        values = ", ".join(f"{c.value:.4f}" for _, c in shown)
        thresholds = ", ".join(f"{c.threshold:.4f}" for _, c in shown)
        found.append(Chart(task, names, common, scale, values, thresholds, which))
    return found


def _markdown(report: Report, rows: int) -> str:
    columns, cells = _columns(report)
    return templates.render(
        "summary.md",
        report=report,
        marks=MARKS,
        rows=rows,
        header=columns[1:],
        cells=lambda entry: [f"{MARKS[entry.outcome]} {entry.outcome}", *cells(entry)[1:]],
        charts=charts(report),
        unscored=sum(1 for e in report.entries if not e.checks),
        problems=[e for e in report.entries if e.outcome != "pass"],
        passed=[e for e in report.entries if e.outcome == "pass"],
        findings=list(findings(report.entries, report.baseline))[:rows]
        if report.baseline is not None
        else [],
    )


def markdown(report: Report) -> str:
    """A GitHub job summary: the verdict, a chart per task, the problems first, then the
    passing configs; tables shortened until the whole fits in SUMMARY_BYTES."""
    rows = MAX_SUMMARY_ROWS
    text = _markdown(report, rows)
    while len(text.encode("utf-8")) > SUMMARY_BYTES and rows > 0:
        rows //= 2
        text = _markdown(report, rows)
    return text


def workflow_commands(report: Report) -> str:
    """GitHub workflow commands: ::error for each failing entry, ::warning for inconclusive."""
    lines = []
    for level, entries in (
        ("error", [e for e in report.entries if e.outcome in FAILING]),
        ("warning", [e for e in report.entries if e.outcome == "inconclusive"]),
    ):
        shown = entries if len(entries) <= MAX_ANNOTATIONS else entries[: MAX_ANNOTATIONS - 1]
        for entry in shown:
            given = {"file": entry.path, "title": f"evalgate verify {entry.outcome}: {entry.key}"}
            where = ",".join(f"{k}={scrub.workflow_property(v)}" for k, v in given.items() if v)
            lines.append(f"::{level} {where}::{scrub.workflow_data(entry.reason)}")
        if len(entries) > len(shown):
            lines.append(
                f"::{level} title=evalgate verify::{len(entries) - len(shown)} more "
                f"{level} entries: see the job summary"
            )
    return "".join(each + "\n" for each in lines)


# JUnit XML.


class Case(NamedTuple):
    """A config's testcase: its entries (a malformed file is its own case), the first path
    given, and how it ended: a failure or an error (`ended`, with the first bad entry), skipped
    (inconclusive), or passed."""

    key: str
    entries: list[Entry]
    path: str | None
    ended: str | None
    first: Entry | None

    @property
    def lines(self) -> list[tuple[Entry, str | None]]:
        """Each entry with its line against the baseline, if any."""
        return [(e, junit_line(e.versus) if e.versus is not None else None) for e in self.entries]


def _case(key: str, entries: list[Entry]) -> Case:
    path = next((e.path for e in entries if e.path), None)
    bad = [e for e in entries if e.outcome in FAILING]
    if bad:
        broken = [e for e in bad if e.outcome in ("error", "malformed")]
        ended = "error" if broken and len(broken) == len(bad) else "failure"
        return Case(key, entries, path, ended, bad[0])
    unsure = next((e for e in entries if e.outcome == "inconclusive"), None)
    return Case(key, entries, path, None, unsure)


def junit(report: Report) -> str:
    """JUnit XML: one testcase per config (a malformed file is its own case)."""
    groups: dict[str, list[Entry]] = {}
    for entry in report.entries:
        groups.setdefault(entry.key, []).append(entry)
    cases = [_case(key, entries) for key, entries in groups.items()]
    tally = {
        "tests": len(cases),
        "failures": sum(1 for c in cases if c.ended == "failure"),
        "errors": sum(1 for c in cases if c.ended == "error"),
        "skipped": sum(1 for c in cases if c.ended is None and c.first is not None),
    }
    return templates.render("junit.xml", cases=cases, tally=tally)


# The comparison with the baseline: its lines are evalgate's words with the outside values apart
# (templates.Said), each made safe by the output that shows it.

BASELINE_HEADER = ["VS BASELINE", "DIFF (95% CI)"]
LISTED = ("protocol", "early-stop", "new", "not compared")
"""Standings listed with their reason: the configs that were not compared."""


def difference(versus: Versus | None) -> str:
    """'-6.07 [-7.62, -4.70] strict-match', or '-' when not compared."""
    if versus is None or versus.difference is None or versus.low is None or versus.high is None:
        return "-"
    return (
        f"{points(versus.difference)} [{points(versus.low)}, {points(versus.high)}] {versus.filter}"
    )


def standing(versus: Versus | None) -> str:
    """'REGRESSION', 'REGRESSION (waived)', 'NEW', ... or '-' without a comparison."""
    if versus is None:
        return "-"
    return versus.standing.upper() + (" (waived)" if versus.waiver is not None else "")


def findings(entries: Iterable[Entry], summary: Baseline) -> Iterator[Said]:
    """The section's lines (no line ends): waived regressions, each config not compared and
    why, the warnings, the baseline's configs missing from the sweep, unused waivers."""
    paths = ", ".join(["{}"] * len(summary.paths))
    yield Said(
        f"Against the baseline {paths} ({{}} results; margin {{:.1f}} points; one-sided exact "
        "tests, Holm's adjustment over the configs):",
        (*summary.paths, summary.results, summary.max_drop * 100),
    )
    for entry in entries:
        versus = entry.versus
        if versus is None:
            continue
        if versus.waiver is not None:
            yield Said(
                "  WAIVED       {}: {}; {}", (entry.key, versus.reason, describe(versus.waiver))
            )
        elif versus.standing in LISTED:
            yield Said("  {:<12} {}: {}", (versus.standing.upper(), entry.key, versus.reason))
        for warning in versus.warnings:
            yield Said("  WARNING      {}: {}", (entry.key, warning))
    for base in summary.missing:
        yield Said(
            "  MISSING      {}: in the baseline ({}), not in this sweep (fails only with --expect)",
            (base.key, base.path),
        )
    for note in summary.unreadable:
        yield Said("  UNREADABLE   {}", (note.reason,))
    for config in summary.unused_waivers:
        yield Said("  UNUSED       the waiver of {} names no config of this sweep", (config,))


def junit_line(versus: Versus) -> str:
    """One line for a config's JUnit testcase (made XML-safe by the caller)."""
    waived = f" ({describe(versus.waiver)})" if versus.waiver is not None else ""
    return f"against the baseline: {versus.standing}{waived}: {versus.reason}"
