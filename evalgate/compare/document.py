"""A Comparison as its JSON document (compare --json, run --baseline's comparison.json): the
types below state it, and schemas/comparison.schema.json is generated from them. Each filter
lists its first ``flips`` flipped questions (the lost ones first), with both runs' answers; the
texts are exact (scrub.json_text scrubs the secrets as it writes them).
"""

from __future__ import annotations

from typing import Annotated, Literal, cast

from msgspec import UNSET, Meta, UnsetType

from evalgate._version import __version__
from evalgate.compare import DEFAULT_FLIPS
from evalgate.compare.comparison import Comparison, FilterComparison, Flip, RunInfo
from evalgate.compare.paired import ALPHA, Finding
from evalgate.compare.report import METHOD
from evalgate.compare.runs import Difference
from evalgate.errors import VerdictCode
from evalgate.evidence.fields import Count, Delta, Fraction, Positive, Record


class Method(Record, kw_only=True, frozen=True):
    """How the runs were compared, in words (report.METHOD)."""

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


def _filter_line(f: FilterComparison, flips: int) -> FilterLine:
    c = f.counts
    return FilterLine(
        filter=f.filter,
        verdict=f.finding,
        reason=f.reason,
        n=c.n,
        questions=c.questions,
        repeats_clustered=c.clustered,
        design_effect=f.design_effect,
        baseline_score=c.baseline_score,
        candidate_score=c.candidate_score,
        difference=c.difference,
        ci_low=f.interval[0],
        ci_high=f.interval[1],
        both_right=c.both_right,
        lost=c.lost,
        gained=c.gained,
        both_wrong=c.both_wrong,
        p_value=f.p_value,
        questions_to_settle=f.questions_to_settle,
        flips_total=len(f.flips),
        flips=f.flips[: max(flips, 0)],
    )


def comparison_document(
    comparison: Comparison, *, flips: int = DEFAULT_FLIPS
) -> ComparisonDocument:
    """The machine-readable comparison."""
    c = comparison
    return ComparisonDocument(
        schema="evalgate.comparison/1",
        evalgate_version=__version__,
        verdict=c.finding,
        exit_code=cast(VerdictCode, int(c.exit_code)),  # a Finding's: PASS, FAIL, INCONCLUSIVE
        reason=c.reason,
        max_drop=c.max_drop,
        alpha=ALPHA,
        method=Method(**METHOD),
        baseline=c.baseline,
        candidate=c.candidate,
        changed=c.changed,
        protocol_drift=c.drift,
        excluded=Excluded(
            failed_baseline=c.failed["baseline"],
            failed_candidate=c.failed["candidate"],
            unpaired=c.unpaired,
        ),
        filters=tuple(_filter_line(f, flips) for f in c.filters),
        warnings=c.warnings,
    )
