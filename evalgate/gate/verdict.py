"""The gate's decision on one run's scores: pure, and never PASS by default.

Every exact_match filter (strict-match and flexible-extract) must reach the floor. No scores at
all, a failed request over the error budget, or too many truncated answers is never a pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

GATED_METRIC = "exact_match"


@dataclass(frozen=True)
class Score:
    """One metric under one filter, as lm-eval reports it."""

    task: str
    metric: str
    filter: str
    value: float
    stderr: float | None
    n: int


@dataclass(frozen=True)
class Check:
    """One score against the floor."""

    metric: str
    filter: str
    value: float
    threshold: float
    passed: bool


@dataclass(frozen=True)
class Verdict:
    """pass or fail, the checks behind it, and a one-line reason."""

    passed: bool
    checks: tuple[Check, ...]
    reason: str


def decide(scores: Sequence[Score], threshold: float) -> Verdict:
    """Gate every exact_match score on the threshold. Zero gated scores is a failure."""
    checks = tuple(
        Check(s.metric, s.filter, s.value, threshold, s.value >= threshold)
        for s in scores
        if s.metric == GATED_METRIC
    )
    if not checks:
        return Verdict(False, checks, "no exact_match score was produced: nothing to gate")
    failed = [c for c in checks if not c.passed]
    if failed:
        worst = min(failed, key=lambda c: c.value)
        listed = ", ".join(f"{c.metric},{c.filter} = {c.value:.4f}" for c in failed)
        return Verdict(
            False, checks, f"{listed} below threshold {threshold:.4f} (worst: {worst.filter})"
        )
    listed = ", ".join(f"{c.filter} {c.value:.4f}" for c in checks)
    return Verdict(True, checks, f"{listed} >= threshold {threshold:.4f}")
