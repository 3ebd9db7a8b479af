"""A sweep's verdict as its document (written by --json): the types below state it, and
schemas/verdict.schema.json is generated from them. The exact texts; scrub.json_text scrubs
the secrets as it writes them. Entries, checks and the baseline are written from the records
verify passes between its steps (records.py), their versus, waivers and notes as they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, structs

from evalgate._version import __version__
from evalgate.errors import VerdictCode
from evalgate.evidence.model import Count, Fraction, Record, Score, to_document
from evalgate.evidence.model import Outcome as CheckOutcome
from evalgate.verify.expect import Expectation
from evalgate.verify.records import (
    OUTCOMES,
    Baseline,
    Entry,
    Note,
    Outcome,
    Source,
    Verdict,
    Versus,
)
from evalgate.verify.sweep import Report

CONFIDENCE = 0.95
"""The level of every interval of the verdict (the gate rule's)."""


class CheckLine(Score, kw_only=True, frozen=True):
    """A score judged against its threshold, with its 95% Wilson interval."""

    low: Fraction = msgspec.field(name="ci_low")
    high: Fraction = msgspec.field(name="ci_high")
    threshold: Fraction
    matched: Annotated[str, Meta(description="Which thresholds.json entry gave the threshold")]
    outcome: CheckOutcome


class Line(Record, kw_only=True, frozen=True):
    """One line of the verdict: a result gated, a file that is not one, or a problem with the
    set of results."""

    key: Annotated[
        str,
        Meta(min_length=1, description="The config's readable name (a path for a malformed file)"),
    ]
    outcome: Outcome
    reason: str
    path: str | None
    source: Source | None
    model: str | None
    labels: Annotated[
        Mapping[str, Any] | None,
        Meta(description="A run's labels; for a config expected (--expect), the manifest's words"),
    ]
    status: Annotated[
        str | None, Meta(description="The run's own status (evalgate result), or error")
    ]
    stage: str | None
    checks: tuple[CheckLine, ...]
    versus: Versus | None = None
    task: Annotated[
        Annotated[str, Meta(min_length=1)] | None,
        Meta(
            description="The config's task, one name whichever tool ran it (evalgate's GSM8K "
            "task files are gsm8k); null for a line that is no config (a malformed file, an "
            "empty path, a count)"
        ),
    ]


class Counts(Record, kw_only=True, frozen=True):
    """How many lines of each outcome (regression and expired: with --baseline)."""

    passed: Count = msgspec.field(name="pass")
    fail: Count
    inconclusive: Count
    error: Count
    malformed: Count
    missing: Count
    unexpected: Count
    duplicate: Count
    empty: Count
    regression: Count = 0
    expired: Count = 0


class VerdictDocument(Record, kw_only=True, frozen=True):
    """The verdict of `evalgate verify` on a sweep: one entry per result found, per malformed
    file, and per problem with the set (missing, unexpected, duplicate, empty path). With
    --baseline, each result's entry carries its comparison with the same config of the
    baseline sweep (versus), and the document what it was compared with (baseline). A config
    is its task, model and labels (evalgate.verdict/2: each entry names its task;
    evalgate.verdict/1, schemas/verdict-1.schema.json, did not)."""

    schema: Literal["evalgate.verdict/2"]
    evalgate_version: str
    verdict: Verdict
    exit_code: VerdictCode
    reason: str
    paths: tuple[str, ...]
    thresholds_file: str
    min_samples: Annotated[
        Count | None,
        Meta(
            description="Questions a score needs before a straddling interval is decided on its "
            "point estimate; null: each task's full test set"
        ),
    ]
    confidence: Annotated[float, Meta(gt=0, le=1)]
    expect: Expectation | None
    counts: Counts
    entries: tuple[Line, ...]
    ignored: tuple[Note, ...]
    baseline: Baseline | None = None


def _line(entry: Entry) -> Line:
    """An entry as the document writes it: a config expected (--expect) by the manifest's
    words, in its order, as it gave them; each check with its interval (CheckRow's low, high)."""
    labels = entry.expected
    if labels is None and entry.labels is not None:
        labels = to_document(entry.labels)
    source = None if entry.source == "history" else entry.source  # never one (records.py)
    shown = structs.replace(entry, labels=None, source=source)
    return structs.replace(msgspec.convert(shown, Line, from_attributes=True), labels=labels)


def document(report: Report) -> VerdictDocument:
    """The verdict document of a report: its fields as they are, its entries as lines."""
    given = structs.asdict(report)
    return VerdictDocument(
        schema="evalgate.verdict/2",
        evalgate_version=__version__,
        confidence=CONFIDENCE,
        expect=given.pop("expectation"),
        counts=msgspec.convert({o: report.count(o) for o in OUTCOMES}, Counts),
        entries=tuple(map(_line, given.pop("entries"))),
        **given,
    )
