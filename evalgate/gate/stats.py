"""How sure a score is: its standard error, its 95% Wilson interval, and what it can decide.

A GSM8K score is a proportion of n questions answered right. Its 95% Wilson score interval is
the range of true accuracies the sample is consistent with; it stays inside [0, 1] and behaves
at small n and near 0 or 1, where the normal-approximation interval does not.

One score against one threshold (``judge``), first match wins:

1. n = 0: FAIL, nothing was measured;
2. the interval lies entirely at or above the threshold: PASS;
3. the interval lies entirely below the threshold: FAIL;
4. the interval straddles the threshold and n >= min_samples: the point estimate decides;
5. otherwise INCONCLUSIVE: the sample is too small for the threshold to mean anything.

``min_samples`` defaults to the full GSM8K test set (1319 questions): a complete run is always
decided, a ``--limit`` run only when it clears the threshold beyond doubt. ``min_samples = 0``
makes every straddling score a point-estimate decision, as the benchmark harness does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

Z95 = 1.959963984540054
"""The two-sided 95% quantile of the standard normal distribution."""

GSM8K_TEST_SIZE = 1319
"""Questions in the GSM8K test split; the default ``min_samples``."""

CheckOutcome = Literal["pass", "fail", "inconclusive"]


@dataclass(frozen=True)
class Judgement:
    """One score against one threshold, with the numbers behind the decision."""

    outcome: CheckOutcome
    stderr: float | None
    low: float
    high: float
    why: str


def wilson_interval(p: float, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion p observed over n trials ((0, 1) when n = 0)."""
    if n <= 0:
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


def judge(
    value: float,
    n: int,
    threshold: float,
    min_samples: int = GSM8K_TEST_SIZE,
    reported_stderr: float | None = None,
) -> Judgement:
    """Decide one score by the rules in this module's docstring."""
    stderr = standard_error(value, n, reported_stderr)
    low, high = wilson_interval(value, n)
    if n <= 0:
        return Judgement("fail", stderr, low, high, "no question was scored (n = 0)")
    if low >= threshold:
        return Judgement("pass", stderr, low, high, "95% interval above the threshold")
    if high < threshold:
        return Judgement("fail", stderr, low, high, "95% interval below the threshold")
    if n >= min_samples:
        if value >= threshold:
            return Judgement("pass", stderr, low, high, "point estimate at or above threshold")
        return Judgement("fail", stderr, low, high, "point estimate below threshold")
    return Judgement(
        "inconclusive",
        stderr,
        low,
        high,
        f"95% interval [{low:.4f}, {high:.4f}] straddles the threshold and n = {n} < "
        f"{min_samples} (--min-samples)",
    )
