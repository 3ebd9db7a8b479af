"""A Comparison for people: a terminal table and Markdown (the JSON document: document.py).

Each form lists the first ``flips`` flipped questions per filter (the lost ones first), with
both runs' answers. Every text the runs gave (paths, labels, filters, questions, answers) is
made safe for its form as it is placed (a terminal line: templates.line; Markdown:
templates/compare.md).
"""

from __future__ import annotations

from evalgate import scrub, templates
from evalgate.compare import DEFAULT_FLIPS
from evalgate.compare.comparison import Comparison, FilterComparison
from evalgate.compare.reason import p_text, points
from evalgate.compare.runs import Difference
from evalgate.templates import Said, line

METHOD = {
    "test": "exact McNemar: two-sided binomial test of lost vs gained, p = 1/2",
    "interval": "Tango score interval for a difference of paired proportions, 95%",
    "rule": "regression: p < alpha and difference < -max_drop; equivalent: interval low end "
    "> -max_drop; otherwise inconclusive; the worst filter decides",
    "repeats": "a question asked more than once (GPQA-diamond's two repeats) is one cluster: "
    "the exact clustered McNemar test (sign flips of each question's gained - lost, Durkalski "
    "2003) and Tango's interval on the counts divided by the design effect (Rao-Scott)",
}
HEADERS = (
    "filter",
    "n",
    "baseline",
    "candidate",
    "diff (pts)",
    "95% CI (pts)",
    "lost",
    "gained",
    "McNemar p",
    "verdict",
)
_QUESTION_CHARS = 100


def figures(f: FilterComparison) -> tuple[str, ...]:
    """A filter's row of the statistics table (HEADERS), its name as the runs gave it."""
    c = f.counts
    return (
        f.filter,
        str(c.n),
        f"{c.baseline_score * 100:.2f}%",
        f"{c.candidate_score * 100:.2f}%",
        points(c.difference),
        f"[{points(f.interval[0])}, {points(f.interval[1])}]",
        str(c.lost),
        str(c.gained),
        p_text(f.p_value),
        f.finding.name,
    )


def _method(comparison: Comparison) -> str:
    if any(f.counts.clustered for f in comparison.filters):
        return (
            "repeated questions clustered: clustered exact McNemar test, Tango 95% score "
            "interval with the design effect"
        )
    return "exact McNemar test, Tango 95% score interval"


def _pairing(f: FilterComparison) -> Said:
    """'extract_abcd: 100 answers to 50 questions paired, ...' (only when questions repeat)."""
    c = f.counts
    return Said(
        "{}: {} answers to {} questions paired by (question, repeat); the repeats of each "
        "question are one cluster in the statistics (design effect {:.2f})",
        (f.filter, c.n, c.questions, f.design_effect),
    )


def changes(items: tuple[Difference, ...], arrow: str = "->") -> str:
    return "; ".join(f"{d.field} {d.baseline} {arrow} {d.candidate}" for d in items)


def _short(text: str) -> str:
    """A question on one line, scrubbed in full before it is cut to _QUESTION_CHARS."""
    flat = " ".join(scrub.text(text).split())
    return flat if len(flat) <= _QUESTION_CHARS else flat[: _QUESTION_CHARS - 3] + "..."


def _flip_sections(c: Comparison, flips: int) -> list[tuple[FilterComparison, int, str | None]]:
    """(filter, flips shown, name of an earlier filter with the very same flips, if any)."""
    sections: list[tuple[FilterComparison, int, str | None]] = []
    for f in c.filters if flips > 0 else ():
        if f.flips:
            same = next((e.filter for e, _, _ in sections if e.flips == f.flips), None)
            sections.append((f, min(flips, len(f.flips)), same))
    return sections


def render_text(comparison: Comparison, *, flips: int = DEFAULT_FLIPS) -> str:
    """The terminal report: verdict line, runs, table, reasons, warnings, flipped questions."""
    c = comparison
    lines = [f"evalgate compare: {c.finding.name} (exit {int(c.exit_code)})"]
    lines += [
        line("  {:<9}  {}  (run {})", side, run.path, run.run_id)
        for side, run in (("baseline", c.baseline), ("candidate", c.candidate))
    ]
    if c.changed:
        lines.append(line("  changed    {}", changes(c.changed)))
    lines += [
        f"  margin     --max-drop {c.max_drop:g} ({c.max_drop * 100:.1f} points); {_method(c)}"
    ]
    lines.append("")
    rows = [HEADERS, *([line("{}", cell) for cell in figures(f)] for f in c.filters)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADERS))]
    for row in rows:
        cells = [
            cell.ljust(w) if i in (0, 9) else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
    lines.append("")
    said = [_pairing(f) for f in c.filters if f.counts.clustered]
    lines += [line(s.text + ".", *s.values) for s in said]
    lines += [line("{}: {}. {}.", f.filter, f.finding.name, f.reason) for f in c.filters]
    if c.drift:
        lines += ["", "protocol differences allowed by --allow-protocol-drift:"]
        lines += [line("  {}", d.describe()) for d in c.drift]
    if c.warnings:
        lines += ["", *(line("warning: {}", w) for w in c.warnings)]
    for f, shown, same in _flip_sections(c, flips):
        if same:
            lines += ["", line("Flipped questions, {}: the same as {}.", f.filter, same)]
            continue
        lines += [
            "",
            line("Flipped questions, {} ({} of {}, lost first):", f.filter, shown, len(f.flips)),
        ]
        lines += [
            line(
                "  doc_id {:<5} {:<6}  target {}  baseline {}  candidate {}\n      {}",
                x.doc_id,
                x.change,
                x.target,
                x.baseline_answer,
                x.candidate_answer,
                _short(x.question),
            )
            for x in f.flips[:flips]
        ]
    return "\n".join(lines) + "\n"


def render_markdown(comparison: Comparison, *, flips: int = DEFAULT_FLIPS) -> str:
    """The same report as Markdown, for a pull request or a job summary (templates/compare.md)."""
    return templates.render(
        "compare.md",
        c=comparison,
        changed=changes(comparison.changed),
        method=_method(comparison),
        headers=HEADERS,
        figures=figures,
        points=points,
        pairing=_pairing,
        sections=_flip_sections(comparison, flips),
        flips=flips,
        short=_short,
    )
