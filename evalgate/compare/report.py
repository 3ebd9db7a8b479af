"""A Comparison for people: a terminal table and Markdown (the JSON document: document.py).

Each form lists the first ``flips`` flipped questions per filter (the lost ones first), with
both runs' answers. Every text the runs gave (paths, labels, filters, questions, answers) goes
through evalgate.outside for its form.
"""

from __future__ import annotations

from evalgate import outside, scrub
from evalgate.compare import DEFAULT_FLIPS
from evalgate.compare.comparison import Comparison, FilterComparison
from evalgate.compare.reason import p_text, points
from evalgate.compare.runs import Difference

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


def _margin(comparison: Comparison, code: str = "") -> str:
    method = "exact McNemar test, Tango 95% score interval"
    if any(f.counts.clustered for f in comparison.filters):
        method = (
            "repeated questions clustered: clustered exact McNemar test, Tango 95% score "
            "interval with the design effect"
        )
    return (
        f"{code}--max-drop {comparison.max_drop:g}{code} ({comparison.max_drop * 100:.1f} points); "
        f"{method}"
    )


def _pairing(f: FilterComparison) -> str:
    """'extract_abcd: 100 answers to 50 questions paired, ...' (only when questions repeat)."""
    c = f.counts
    return (
        f"{outside.terminal(f.filter)}: {c.n} answers to {c.questions} questions paired by "
        "(question, repeat); "
        f"the repeats of each question are one cluster in the statistics (design effect "
        f"{f.design_effect:.2f})"
    )


def changes(items: tuple[Difference, ...], arrow: str = "->") -> str:
    return "; ".join(f"{d.field} {d.baseline} {arrow} {d.candidate}" for d in items)


def _short(text: str) -> str:
    flat = outside.terminal(" ".join(scrub.text(text).split()))  # in full, before the cut
    return flat if len(flat) <= _QUESTION_CHARS else flat[: _QUESTION_CHARS - 3] + "..."


def _flip_sections(c: Comparison, flips: int) -> list[tuple[FilterComparison, str, str | None]]:
    """(filter, heading, name of an earlier filter with the very same flips, if any)."""
    sections: list[tuple[FilterComparison, str, str | None]] = []
    for f in c.filters if flips > 0 else ():
        if f.flips:
            same = next((e.filter for e, _, _ in sections if e.flips == f.flips), None)
            shown = min(flips, len(f.flips))
            name = outside.terminal(f.filter)
            heading = f"Flipped questions, {name} ({shown} of {len(f.flips)}, lost first)"
            sections.append((f, f"Flipped questions, {name}" if same else heading, same))
    return sections


def render_text(comparison: Comparison, *, flips: int = DEFAULT_FLIPS) -> str:
    """The terminal report: verdict line, runs, table, reasons, warnings, flipped questions."""
    c = comparison
    t = outside.terminal
    lines = [f"evalgate compare: {c.finding.name} (exit {int(c.exit_code)})"]
    lines += [
        f"  {side:<9}  {t(run.path)}  (run {t(run.run_id)})"
        for side, run in (("baseline", c.baseline), ("candidate", c.candidate))
    ]
    if c.changed:
        lines.append(f"  changed    {t(changes(c.changed))}")
    lines += [f"  margin     {_margin(c)}", ""]
    rows = [HEADERS, *([t(cell) for cell in figures(f)] for f in c.filters)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADERS))]
    for row in rows:
        cells = [
            cell.ljust(w) if i in (0, 9) else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
    lines.append("")
    lines += [f"{_pairing(f)}." for f in c.filters if f.counts.clustered]
    lines += [f"{t(f.filter)}: {f.finding.name}. {t(f.reason)}." for f in c.filters]
    if c.drift:
        lines += ["", "protocol differences allowed by --allow-protocol-drift:"]
        lines += [f"  {t(d.describe())}" for d in c.drift]
    if c.warnings:
        lines += ["", *(f"warning: {t(w)}" for w in c.warnings)]
    for f, heading, same in _flip_sections(c, flips):
        if same:
            lines += ["", f"{heading}: the same as {t(same)}."]
            continue
        lines += ["", f"{heading}:"]
        lines += [
            f"  doc_id {x.doc_id:<5} {x.change:<6}  target {t(x.target)}  baseline "
            f"{t(x.baseline_answer)}  candidate {t(x.candidate_answer)}\n"
            f"      {_short(x.question)}"
            for x in f.flips[:flips]
        ]
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return outside.markdown(" ".join(text.split()))


def render_markdown(comparison: Comparison, *, flips: int = DEFAULT_FLIPS) -> str:
    """The same report as Markdown, for a pull request or a job summary."""
    c = comparison
    code = outside.markdown_code
    lines = [
        f"## evalgate compare: {c.finding.name}",
        "",
        f"Baseline {code(c.baseline.path)} (run {code(c.baseline.run_id)}), candidate "
        f"{code(c.candidate.path)} (run {code(c.candidate.run_id)}).",
    ]
    if c.changed:
        lines.append(f"Changed: {_cell(changes(c.changed))}.")
    lines += [
        f"Margin: {_margin(c, '`')}.",
        "",
        "| " + " | ".join(HEADERS) + " |",
        "|---|" + "--:|" * (len(HEADERS) - 2) + "---|",
    ]
    lines += ["| " + " | ".join([_cell(f.filter), *figures(f)[1:]]) + " |" for f in c.filters]
    lines += [""] + [f"- {_cell(_pairing(f))}." for f in c.filters if f.counts.clustered]
    lines += [f"- **{_cell(f.filter)}**: {f.finding.name}. {_cell(f.reason)}." for f in c.filters]
    if c.drift:
        lines += ["", "Protocol differences allowed by `--allow-protocol-drift`:", ""]
        lines += [f"- {_cell(d.describe())}" for d in c.drift]
    if c.warnings:
        lines += ["", *(f"> warning: {_cell(w)}" for w in c.warnings)]
    for f, heading, same in _flip_sections(c, flips):
        if same:
            lines += ["", f"### {_cell(heading)}", "", f"The same as {_cell(same)}."]
            continue
        lines += [
            "",
            f"### {_cell(heading)}",
            "",
            "| doc_id | change | target | baseline | candidate | question |",
            "|--:|---|---|---|---|---|",
        ]
        lines += [
            f"| {x.doc_id} | {_cell(x.change)} | {_cell(x.target)} | {_cell(x.baseline_answer)} | "
            f"{_cell(x.candidate_answer)} | {_cell(_short(x.question))} |"
            for x in f.flips[:flips]
        ]
    return "\n".join(lines) + "\n"
