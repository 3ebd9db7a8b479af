"""How sure a score is: its standard error and its 95% Wilson interval.

A GSM8K score is a proportion of n questions answered right. Its 95% Wilson score interval is
the range of true accuracies the sample is consistent with; it stays inside [0, 1] and behaves
at small n and near 0 or 1, where the normal-approximation interval does not.

The gate rule that uses them is rules/verdict.py.
"""

from __future__ import annotations

import math

Z95 = 1.959963984540054
"""The two-sided 95% quantile of the standard normal distribution."""


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
