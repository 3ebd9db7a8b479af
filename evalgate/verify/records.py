"""The records verify passes between its steps: a run found on disk (or a path that is not
one), what a sweep's paths hold, and a line of the verdict with the checks behind it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal, get_args

import msgspec
from msgspec import Meta

from evalgate.evidence.model import (
    Count,
    Delta,
    EarlyStopRecord,
    Fraction,
    Labels,
    Record,
    Score,
    VerdictRecord,
)
from evalgate.evidence.model import Outcome as CheckOutcome
from evalgate.gate.verdict import wilson_interval

SetOutcome = Literal["missing", "unexpected", "duplicate"]
"""A problem with the set of results (expect.py)."""
Source = Literal["evalgate", "lm-eval"]
"""Which tool wrote a result."""


class Found(msgspec.Struct, frozen=True):
    """One run to gate, whichever tool wrote it."""

    path: str
    source: Source
    model: str | None
    labels: Labels
    scores: tuple[Score, ...]
    status: str | None = None
    """evalgate: the run's own status, or "skipped" (listed as not run in an `evalgate hook`
    summary); lm-eval: None, or "error" when the harness says the eval failed."""
    stage: str | None = None
    reason: str | None = None
    failed_on_scores: bool = False
    """evalgate: the run's own checks failed (so the recorded "fail" is about scores)."""
    verdict: VerdictRecord | None = None
    """evalgate: the gate rule's decision as the run recorded it, with its parameters."""
    early_stop: EarlyStopRecord | None = None
    """evalgate: the sequential test's record (--early-stop), which the gate rule reads."""
    holder: str | None = None
    """evalgate, status running: the process id holding the folder's lock file (the run is
    still alive), or None (it was interrupted)."""
    task: str | None = None
    """The task the run was asked for, as it recorded it (None: not recorded, which is GSM8K)."""


class Note(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A path that is not a usable result, and why."""

    path: str
    reason: str


class Collection(msgspec.Struct):
    """Everything found under the paths given: the runs, and the paths that are not runs."""

    found: Iterable[Found] = msgspec.field(default_factory=list)
    malformed: list[Note] = msgspec.field(default_factory=list)
    ignored: list[Note] = msgspec.field(default_factory=list)
    empty: list[str] = msgspec.field(default_factory=list)


Verdict = Literal["pass", "fail", "inconclusive"]
Outcome = Literal[CheckOutcome, "error", "malformed", SetOutcome, "empty", "regression", "expired"]
"""A verdict line's outcome: a score's verdict, a run that errored, a file that is malformed, a
problem with the set (expect.py), a path with nothing in it, a config that regressed against
its baseline (--baseline), or a waiver that expired (--waivers)."""
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)
FAILING = frozenset(OUTCOMES) - {"pass", "inconclusive"}


class CheckRow(Score, kw_only=True, frozen=True):
    """A score judged: one exact_match score against its threshold, with its uncertainty. Its
    95% interval is not held (a sweep holds a row per score) but worked out from value and n as
    the gate rule does; the verdict document writes it (verify/document.py, CheckLine)."""

    threshold: Fraction
    matched: Annotated[str, Meta(description="Which thresholds.json entry gave the threshold")]
    outcome: CheckOutcome

    @property
    def low(self) -> float:
        return wilson_interval(self.value, self.n)[0]

    @property
    def high(self) -> float:
        return wilson_interval(self.value, self.n)[1]


Standing = Literal[
    "regression",
    "inconclusive",
    "equivalent",
    "improved",
    "new",
    "protocol",
    "early-stop",
    "not compared",
]
"""A config against its baseline: compare's findings (after the sweep's adjustment), or why it
was not compared: new in the sweep, measured another way, stopped early, or no pair to read."""


class Waiver(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """An accepted regression (--waivers): which config, why, who accepted it, until when."""

    config: str
    reason: str
    who: str
    until: str
    """An ISO date: the waiver holds through that day."""


class LostQuestion(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A question the baseline's run answered rightly and the sweep's wrongly."""

    doc_id: Count
    question: str
    target: str
    baseline_answer: str
    candidate_answer: str


class Versus(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """--baseline: this config against the same config of the baseline sweep (null without
    --baseline, and for a line that is no result). Every field is written (Versus.listed: a
    config with no statistics)."""

    standing: Annotated[
        Standing,
        Meta(
            description="compare's finding after the sweep's adjustment, or why the config was "
            "not compared"
        ),
    ]
    reason: str
    baseline_path: str | None
    filter: Annotated[
        str | None,
        Meta(description="The deciding filter (the worst finding, the largest drop among equals)"),
    ]
    difference: Annotated[
        Delta | None,
        Meta(description="Candidate minus baseline on the deciding filter, as a fraction"),
    ]
    low: Delta | None = msgspec.field(name="ci_low")
    high: Delta | None = msgspec.field(name="ci_high")
    lost: Count
    gained: Count
    n: Count
    p_value: Annotated[
        Fraction | None,
        Meta(
            description="The one-sided p-value for a drop after Holm's adjustment over the "
            "configs compared"
        ),
    ]
    differences: tuple[str, ...] = msgspec.field(name="protocol_differences")
    """The protocol differences, for a config measured another way."""
    lost_questions: tuple[LostQuestion, ...]
    """The deciding filter's lost questions (a regression's), at most MAX_LOST of them."""
    warnings: tuple[str, ...]
    waiver: Waiver | None
    """The waiver that accepts this regression (a regression waived does not fail)."""

    @classmethod
    def listed(
        cls,
        standing: Standing,
        reason: str,
        baseline_path: str | None = None,
        differences: tuple[str, ...] = (),
    ) -> Versus:
        """A config not paired with its baseline's (new, measured another way, stopped early,
        not compared): listed, with no statistics."""
        return cls(
            standing,
            reason,
            baseline_path,
            filter=None,
            difference=None,
            low=None,
            high=None,
            lost=0,
            gained=0,
            n=0,
            p_value=None,
            differences=differences,
            lost_questions=(),
            warnings=(),
            waiver=None,
        )


class Entry(msgspec.Struct, frozen=True):
    """One line of the verdict: a result gated, or a problem with the set."""

    key: str
    """The config's readable name (a path for a malformed file)."""
    outcome: Outcome
    reason: str
    path: str | None = None
    source: Source | Literal["history"] | None = None
    """Which tool wrote the result (None: a line that is no result; history: a baseline's run
    read from a history, never a line of the verdict)."""
    model: str | None = None
    labels: Labels | None = None
    """A run's labels; for a config expected (--expect), those it names (the rest None)."""
    status: str | None = None
    """The run's own status (an evalgate result's), or error (an lm-eval run's that failed)."""
    stage: str | None = None
    checks: tuple[CheckRow, ...] = ()
    versus: Versus | None = None
    """Against the baseline (--baseline): how this config compares, or why it does not."""
    expected: Mapping[str, Any] | None = None
    """A config expected (--expect) as the manifest gives it: the document's labels."""
    task: str | None = None
    """The config's task, one name whichever tool ran it (expect.config_task); None for a
    line that is no config (a malformed file, an empty path, a count)."""

    def problem(self, outcome: Outcome, reason: str, key: str | None = None) -> Entry:
        """A problem with the set about this entry's config (a line with no checks of its own)."""
        return Entry(
            key or self.key,
            outcome,
            reason,
            self.path,
            model=self.model,
            labels=self.labels,
            task=self.task,
        )


class Missing(Record, kw_only=True, frozen=True):
    """A config of the baseline with no result in the sweep."""

    key: str
    path: str | None


class Baseline(Record, kw_only=True, frozen=True):
    """--baseline: the baseline sweep compared with (null without --baseline)."""

    paths: tuple[str, ...]
    max_drop: Fraction
    results: Count
    """Results found in the baseline."""
    waivers_file: str | None
    missing: tuple[Missing, ...]
    """The baseline's configs with no result in the sweep (they fail only with --expect)."""
    unused_waivers: tuple[str, ...]
    """The configs of the waivers that name no config of the sweep."""
    unreadable: tuple[Note, ...]
    """The baseline's files that could not be read (their configs are compared as new)."""
