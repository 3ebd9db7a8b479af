"""A Comparison in each form it takes: a terminal table and Markdown, one self-contained page
(compare --html; what it shows: docs/compare.md, "What it reports"), and the JSON document
(compare --json, run --baseline's comparison.json), whose types state it: the schema
comparison.schema.json is generated from them.

Each form lists the first ``flips`` flipped questions per filter (the lost ones first), with
both runs' answers. Every text the runs gave (paths, labels, filters, questions, answers) is
made safe for its form as it is placed (a terminal line: templates.line; Markdown:
templates/compare.md; the page: templates/compare.html); the document's texts are exact
(scrub.json_text scrubs the secrets as it writes them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal, NamedTuple

from msgspec import UNSET, Meta, UnsetType

from evalgate import scrub, templates
from evalgate._version import __version__
from evalgate.compare import DEFAULT_FLIPS
from evalgate.compare.comparison import Comparison, FilterComparison, Flip, RunInfo, p_text, points
from evalgate.compare.paired import ALPHA, Finding
from evalgate.compare.runs import Difference, format_doc_ids
from evalgate.errors import VerdictCode
from evalgate.evidence.model import Count, Delta, Fraction, Positive, Record
from evalgate.templates import Mark, Said, Scale, line

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


def _same_flips(c: Comparison) -> list[str | None]:
    """Each filter's earlier filter with the very same flips, if any (none without flips)."""
    first: dict[tuple[Flip, ...], str] = {}
    same: list[str | None] = []
    for f in c.filters:
        earlier = first.setdefault(f.flips, f.filter)
        same.append(earlier if f.flips and earlier != f.filter else None)
    return same


def _flip_sections(c: Comparison, flips: int) -> list[tuple[FilterComparison, int, str | None]]:
    """(filter, flips shown, name of an earlier filter with the very same flips, if any)."""
    found = zip(c.filters, _same_flips(c), strict=True)
    return [(f, min(flips, len(f.flips)), same) for f, same in found if f.flips and flips > 0]


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


# The page.


def _line(f: FilterComparison, note: str) -> templates.Line:
    return templates.Line(templates.tone(f.finding.value), f.finding.name, f.filter, note)


class Move(NamedTuple):
    """A filter's row of the scores chart: its words, what the drawing says, the two scores."""

    line: templates.Line
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
            f"{f.filter}: baseline {before:.2%}, candidate {after:.2%} "
            f"over {f.counts.n} paired questions"
            if not f.counts.clustered
            else f"over {f.counts.n} paired answers to {f.counts.questions} questions, their "
            "repeats clustered"
        )
        line = _line(f, f"n={f.counts.n}")
        moves.append(Move(line, described, before, after, (f"{before:.2%}", f"{after:.2%}")))
    return Scores(scale, {t: f"{t * 100:g}%" for t in scale.ticks()}, moves)


class Bar(NamedTuple):
    """A paired difference to draw: its row's words, whose difference it is (and on which
    filter, when that is not the name), the difference and its 95% interval."""

    line: templates.Line
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
    tone: templates.Tone


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
        rows.append(Statistics(f, cells, templates.tone(f.finding.value)))
    return rows


class Flips(NamedTuple):
    """A filter's flipped questions: listed, or the name of an earlier filter with the same."""

    title: str
    filter: FilterComparison
    same: str | None


def _flips(c: Comparison) -> list[Flips]:
    return [
        Flips(
            f"Flipped questions, {f.filter}: {f.counts.lost} lost, {f.counts.gained} gained",
            f,
            same,
        )
        for f, same in zip(c.filters, _same_flips(c), strict=True)
    ]


def render(comparison: Comparison) -> str:
    c = comparison
    return templates.render_page(
        "compare.html",
        title=f"evalgate compare: {c.finding.name}",
        tone=templates.tone(c.finding.value),
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


# The JSON document.


class Method(Record, kw_only=True, frozen=True):
    """How the runs were compared, in words."""

    test: str
    interval: str
    rule: str
    repeats: str | UnsetType = UNSET


class Excluded(Record, kw_only=True, frozen=True):
    """The questions left out of the pairing."""

    failed_baseline: Annotated[
        tuple[Count, ...], Meta(description="doc_ids whose request failed in the baseline")
    ]
    failed_candidate: tuple[Count, ...]
    unpaired: Annotated[
        tuple[Count, ...],
        Meta(
            description="shared doc_ids whose question text differs (only under "
            "--allow-protocol-drift)"
        ),
    ]


class FilterLine(Record, kw_only=True, frozen=True):
    """One filter's paired table, statistics and verdict."""

    filter: str
    verdict: Finding
    reason: str
    n: Annotated[
        Count,
        Meta(
            description="answers paired: answered (no failed request) in both runs; a question "
            "asked more than once counts once per repeat"
        ),
    ]
    questions: Annotated[
        Count,
        Meta(
            description="questions paired: n when every question is asked once, else the "
            "clusters (a question's repeats are one)"
        ),
    ]
    repeats_clustered: Annotated[
        bool,
        Meta(
            description="true when a question was asked more than once and its repeats were "
            "treated as one cluster in the statistics (clustered McNemar, interval with the "
            "design effect)"
        ),
    ]
    design_effect: Annotated[
        float,
        Meta(
            ge=1,
            description="the variance inflation from clustering the repeats (1 when questions "
            "are not repeated)",
        ),
    ]
    baseline_score: Annotated[Fraction, Meta(description="accuracy over the paired questions")]
    candidate_score: Fraction
    difference: Annotated[Delta, Meta(description="candidate_score - baseline_score")]
    ci_low: Annotated[
        Delta,
        Meta(
            description="95% Tango score interval of the difference (on the counts divided by "
            "the design effect when questions repeat)"
        ),
    ]
    ci_high: Delta
    both_right: Count
    lost: Annotated[Count, Meta(description="right in the baseline, wrong in the candidate")]
    gained: Annotated[Count, Meta(description="wrong in the baseline, right in the candidate")]
    both_wrong: Count
    p_value: Annotated[
        Fraction,
        Meta(
            description="exact McNemar: two-sided binomial test of lost vs gained; with "
            "repeated questions its clustered form (sign flips of each question's gained - lost)"
        ),
    ]
    questions_to_settle: Annotated[
        Positive | None,
        Meta(
            description="inconclusive only: estimated paired questions for the interval to "
            "decide at the observed rates; null when out of reach or not inconclusive"
        ),
    ]
    flips_total: Count
    flips: Annotated[
        tuple[Flip, ...],
        Meta(description="the first flips (lost first, by doc_id), as many as --flips asks"),
    ]


class ComparisonDocument(Record, kw_only=True, frozen=True):
    """Two runs over the same GSM8K questions, paired per filter: scores, the difference with
    its 95% interval, the discordant counts, an exact McNemar p-value and a verdict against the
    margin --max-drop."""

    schema: Literal["evalgate.comparison/1"]
    evalgate_version: str
    verdict: Annotated[
        Finding,
        Meta(description="the worst filter's: regression > inconclusive > equivalent > improved"),
    ]
    exit_code: Annotated[
        VerdictCode, Meta(description="0 improved or equivalent, 1 regression, 5 inconclusive")
    ]
    reason: str
    max_drop: Annotated[
        Fraction, Meta(description="the margin, a fraction of accuracy (0.02 = two points)")
    ]
    alpha: Fraction
    method: Method
    baseline: RunInfo
    candidate: RunInfo
    changed: Annotated[
        tuple[Difference, ...], Meta(description="labels and model that differ between the runs")
    ]
    protocol_drift: Annotated[
        tuple[Difference, ...],
        Meta(description="protocol differences let through by --allow-protocol-drift"),
    ]
    excluded: Excluded
    filters: Annotated[tuple[FilterLine, ...], Meta(min_length=1)]
    warnings: tuple[str, ...]


def _held(kind: type[Record], *sources: object) -> dict[str, Any]:
    """What the sources hold under the names of `kind`'s fields (a later source's over an
    earlier's): the values a document takes as they are."""
    fields = kind.__struct_fields__
    return {name: getattr(s, name) for s in sources for name in fields if hasattr(s, name)}


def _filter_line(f: FilterComparison, flips: int) -> FilterLine:
    line = _held(FilterLine, f.counts, f)
    line.update(
        verdict=f.finding,
        repeats_clustered=f.counts.clustered,
        ci_low=f.interval[0],
        ci_high=f.interval[1],
        flips_total=len(f.flips),
        flips=f.flips[: max(flips, 0)],
    )
    return FilterLine(**line)


def comparison_document(
    comparison: Comparison, *, flips: int = DEFAULT_FLIPS
) -> ComparisonDocument:
    """The machine-readable comparison."""
    c = comparison
    document = _held(ComparisonDocument, c)
    document.update(
        schema="evalgate.comparison/1",
        evalgate_version=__version__,
        verdict=c.finding,
        exit_code=int(c.exit_code),  # a Finding's: PASS, FAIL, INCONCLUSIVE
        alpha=ALPHA,
        method=Method(**METHOD),
        protocol_drift=c.drift,
        excluded=Excluded(
            failed_baseline=c.failed["baseline"],
            failed_candidate=c.failed["candidate"],
            unpaired=c.unpaired,
        ),
        filters=tuple(_filter_line(f, flips) for f in c.filters),
    )
    return ComparisonDocument(**document)
