"""The gate rule: one run's scores against their threshold, pure and never PASS by default; and
how sure a score is, its standard error and its 95% Wilson interval. One rule for run, hook and
verify, so a result's verdict is the same from the run that wrote it and from verify reading it
(the rule, step by step: docs/verify.md, "How each result is gated").

A GSM8K score is a proportion of n questions answered right. Its 95% Wilson score interval is
the range of true accuracies the sample is consistent with; it stays inside [0, 1] and behaves
at small n and near 0 or 1, where the normal-approximation interval does not.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import msgspec

from evalgate.errors import ExitCode
from evalgate.evidence.model import Check, EarlyStopRecord, Outcome, Score, VerdictRecord
from evalgate.gate.sequential import judge_stopped

Z95 = 1.959963984540054
"""The two-sided 95% quantile of the standard normal distribution."""


def wilson_interval(p: float, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion p observed over n trials ((0, 1) when n = 0 or
    p is not a finite number)."""
    if n <= 0 or not math.isfinite(p):
        return 0.0, 1.0
    z2n = z * z / n
    centre = (p + z2n / 2) / (1 + z2n)
    half = z * math.sqrt(max(p * (1 - p), 0.0) / n + z2n / (4 * n)) / (1 + z2n)
    # The interval always holds p; the clamps only undo rounding at p = 0 and p = 1.
    return max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half))


def standard_error(p: float, n: int, reported: float | None = None) -> float | None:
    """The score's standard error: the one reported when there is one, else sqrt(p(1-p)/(n-1))."""
    if reported is not None and math.isfinite(reported):
        return reported
    if n <= 1:
        return None
    return math.sqrt(max(p * (1 - p), 0.0) / (n - 1))


# The rule.

GATED_METRIC = "exact_match"
REQUIRED_FILTERS = {"gsm8k": ("strict-match", "flexible-extract"), "gpqa": ("extract_abcd",)}
"""The filters a task's gate needs, by task family (a task named gsm8k or gsm8k_*; GPQA's
gpqa_diamond_cot_n_shot has the one filter extract_abcd)."""


class Verdict(msgspec.Struct, frozen=True):
    """The run's outcome, the checks behind it, and a one-line reason."""

    outcome: Outcome
    reason: str
    checks: tuple[Check, ...]
    min_samples: int
    problems: tuple[str, ...] = ()
    doubts: tuple[str, ...] = ()

    @property
    def exit_code(self) -> ExitCode:
        """0 pass, 1 fail, 5 inconclusive."""
        return ExitCode[self.outcome.upper()]

    def record(self) -> VerdictRecord:
        """The verdict as result.json records it (all but its checks, which it holds apart)."""
        return msgspec.convert(self, VerdictRecord, from_attributes=True)


def _certain(
    score: Score, threshold: float, early_stop: EarlyStopRecord | None, gated: int
) -> Outcome | None:
    """A stopped run's sequential test on this score, at this threshold (None: not certain)."""
    if early_stop is None or not early_stop.stopped:
        return None
    right = round(score.value * score.n)
    side = judge_stopped(right, score.n, threshold, gated, early_stop.alpha)
    return None if side is None else ("pass" if side == "above" else "fail")


def judge(
    score: Score,
    threshold: float,
    min_samples: int,
    *,
    early_stop: EarlyStopRecord | None = None,
    gated: int = 1,
) -> Check:
    """One score against the threshold, by the rules in this module's docstring (`gated`: how
    many scores the run gates, which the sequential test's FAIL shares its alpha among)."""
    value, n = score.value, score.n
    low, high = wilson_interval(value, n)
    certain = _certain(score, threshold, early_stop, gated) if math.isfinite(value) else None
    if n <= 0 or not math.isfinite(value):
        outcome: Outcome = "fail"
    elif certain is not None:
        outcome = certain
    elif low >= threshold:
        outcome = "pass"
    elif high < threshold:
        outcome = "fail"
    elif n >= min_samples:
        outcome = "pass" if value >= threshold else "fail"
    else:
        outcome = "inconclusive"
    return Check(
        metric=score.metric,
        filter=score.filter,
        value=value,
        threshold=threshold,
        passed=outcome == "pass",
        n=n,
        low=low,
        high=high,
        outcome=outcome,
    )


def listing(checks: Sequence[Check]) -> str:
    """'strict-match 0.8500 (95% CI 0.7200-0.9300, n=50), ...'."""
    return ", ".join(
        f"{c.filter} {c.value:.4f} (95% CI {c.low or 0.0:.4f}-{c.high or 0.0:.4f}, n={c.n})"
        for c in checks
    )


def _missing(scores: Sequence[Score], gated: Sequence[Check]) -> list[str]:
    """What the gate of each task needs and the gated checks lack."""
    have = {c.filter for c in gated}
    tasks = sorted({s.task for s in scores if s.metric == GATED_METRIC})
    return [
        f"no {GATED_METRIC},{name} score: the {family} gate needs every one of "
        f"{', '.join(REQUIRED_FILTERS[family])}"
        for family in (task.split("_", 1)[0] for task in tasks)
        for name in REQUIRED_FILTERS.get(family, ())
        if name not in have
    ]


def decide(
    scores: Sequence[Score],
    threshold: float,
    *,
    min_samples: int,
    matched: str | None = None,
    problems: Sequence[str] = (),
    doubts: Sequence[str] = (),
    early_stop: EarlyStopRecord | None = None,
) -> Verdict:
    """The gate rule on one run's scores (see the module docstring)."""
    gated = [s for s in scores if s.metric == GATED_METRIC]
    checks = tuple(
        judge(s, threshold, min_samples, early_stop=early_stop, gated=len(gated)) for s in gated
    )
    floor = f"threshold {threshold:.4f}" + (f" ({matched})" if matched else "")
    early = ""
    if early_stop is not None and early_stop.stopped:
        early = (
            f"; stopped early after {early_stop.questions_used} of {early_stop.questions} "
            f"questions, the sequential test certain at alpha {early_stop.alpha}"
        )

    def verdict(outcome: Outcome, reason: str) -> Verdict:
        return Verdict(outcome, reason, checks, min_samples, tuple(problems), tuple(doubts))

    # Every reason names the floor and the entry it came from (`matched`), a run's last line
    # too: a floor from another entry than the one meant shows there.
    if not checks:
        return verdict("fail", f"no exact_match score was produced: nothing to gate on {floor}")
    failed = [c for c in checks if c.outcome == "fail"]
    unsure = [c for c in checks if c.outcome == "inconclusive"]
    reasons = [f"{listing(failed)} below {floor}{early}"] if failed else []
    reasons += _missing(scores, checks)
    reasons += list(problems)
    if reasons:
        scores_too = [] if failed else [f"{listing(checks)} vs {floor}{early}"]
        return verdict("fail", "; ".join([*reasons, *scores_too]))
    if unsure:
        reasons.append(
            f"{listing(unsure)} vs {floor}: the 95% interval straddles the threshold and "
            f"n < {min_samples}; run the full test set, or pass --min-samples 0 to decide on "
            "the point estimate"
        )
        return verdict("inconclusive", "; ".join([*reasons, *doubts]))
    if doubts:
        return verdict("inconclusive", "; ".join([*doubts, f"{listing(checks)} >= {floor}{early}"]))
    return verdict("pass", f"{listing(checks)} >= {floor}{early}")
