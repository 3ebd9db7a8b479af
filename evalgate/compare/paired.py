"""Two runs over the same questions: the paired statistics and the rule that reads them.

Per filter, every question answered in both runs falls in one cell::

                        candidate right   candidate wrong
    baseline right      both_right        lost
    baseline wrong      gained            both_wrong

    difference d = candidate score - baseline score = (gained - lost) / n

- Test: exact McNemar, the two-sided binomial test of the discordant pairs,
  p = min(1, 2 P[X <= min(lost, gained)]) with X ~ Bin(lost + gained, 1/2); p = 1 with none.
- Interval: Tango's score interval for a difference of paired proportions (Tango 1998,
  Statistics in Medicine 17:891), 95%. Unlike the Wald interval it keeps a width when no
  question flipped: z^2 / (n + z^2) either side, 0.071 at n = 50 and 0.0029 at n = 1319.
- Rule, margin m = max_drop (a fraction: 0.02 is two points), first match wins:
    REGRESSION    p < 0.05 and d < -m/2   (a significant drop of practical size: at least
                                           half the margin)
    EQUIVALENT    the interval's lower end > -m   (any drop is smaller than the margin)
    INCONCLUSIVE  otherwise
  A drop that is certain but smaller than the margin (21 questions lost and none gained of
  1319: -1.6 points, p = 1e-6) is a REGRESSION: the question asked is "did the change cost
  accuracy?", and the margin only says how large a cost can still be ruled out. Requiring the
  observed drop to pass the whole margin would call a true 2-point drop a REGRESSION only about
  half the time. Measured on full GSM8K with 3% of questions flipping between runs (the tests'
  simulation, docs/compare.md): no change is EQUIVALENT in ~98% of runs and a REGRESSION in ~1%,
  a true 2-point drop a REGRESSION in ~89%.
- Questions to settle an INCONCLUSIVE (an estimate): keep the four cells' proportions and grow
  n until the rule would decide: when d > -m/2, until the interval's lower end passes -m
  (EQUIVALENT); when d < -m/2, until the exact test on the rescaled (rounded) discordant counts
  gives p < 0.05 (REGRESSION). It assumes the proportions hold, which they need not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from fractions import Fraction
from statistics import NormalDist

from evalgate.errors import ExitCode

PRACTICAL_SHARE = 0.5
"""A REGRESSION's observed drop must reach this share of the margin (half: one point of two)."""
ALPHA = 0.05
"""Significance level of the test; the interval is the matching 1 - ALPHA = 95%."""
Z = NormalDist().inv_cdf(1 - ALPHA / 2)
SETTLE_CAP = 10_000_000
"""Beyond this many questions the estimate is reported as out of reach."""
EXACT_LIMIT = 5_000
"""Discordant pairs beyond which the estimate uses the score interval for the test (speed)."""
_STEPS = 64


class Finding(Enum):
    """What a comparison found. Ordered from best to worst."""

    EQUIVALENT = "equivalent"
    INCONCLUSIVE = "inconclusive"
    REGRESSION = "regression"

    @property
    def exit_code(self) -> ExitCode:
        """The `evalgate compare` exit code for this finding."""
        return {
            Finding.EQUIVALENT: ExitCode.PASS,
            Finding.INCONCLUSIVE: ExitCode.INCONCLUSIVE,
            Finding.REGRESSION: ExitCode.FAIL,
        }[self]

    @property
    def rank(self) -> int:
        """0 for the best finding; the worst of several findings has the highest rank."""
        return list(Finding).index(self)


@dataclass(frozen=True)
class PairedCounts:
    """The 2x2 table of one filter over the questions both runs answered."""

    both_right: int
    lost: int
    gained: int
    both_wrong: int

    @property
    def n(self) -> int:
        """Questions paired."""
        return self.both_right + self.lost + self.gained + self.both_wrong

    @property
    def baseline_score(self) -> float:
        """Baseline accuracy over the paired questions."""
        return (self.both_right + self.lost) / self.n if self.n else 0.0

    @property
    def candidate_score(self) -> float:
        """Candidate accuracy over the paired questions."""
        return (self.both_right + self.gained) / self.n if self.n else 0.0

    @property
    def difference(self) -> float:
        """Candidate minus baseline, as a fraction."""
        return (self.gained - self.lost) / self.n if self.n else 0.0


def mcnemar_exact_p(lost: int, gained: int) -> float:
    """Two-sided exact McNemar p-value, computed in exact integers."""
    total, low = lost + gained, min(lost, gained)
    term = tail = 1  # C(total, 0)
    for i in range(low):
        term = term * (total - i) // (i + 1)
        tail += term
    return float(min(Fraction(1), Fraction(2 * tail, 2**total)))


def _tango_z(gained: float, lost: float, n: float, delta: float) -> float:
    """Tango's score statistic for H0: difference = delta (here gained plays n12, lost n21)."""
    a = 2 * n
    b = -gained - lost + (2 * n - gained + lost) * delta
    c = -lost * delta * (1 - delta)
    p21 = (math.sqrt(max(b * b - 4 * a * c, 0.0)) - b) / (2 * a)
    numerator = gained - lost - n * delta
    variance = n * (2 * p21 + delta * (1 - delta))
    if variance <= 0:
        return math.copysign(math.inf, numerator) if numerator else 0.0
    return numerator / math.sqrt(variance)


def _bound(gained: float, lost: float, n: float, *, lower: bool) -> float:
    """One end of the interval by bisection: the statistic falls with delta."""
    estimate = (gained - lost) / n
    low, high = (-1.0, estimate) if lower else (estimate, 1.0)
    for _ in range(_STEPS):
        middle = (low + high) / 2
        z = _tango_z(gained, lost, n, middle)
        if lower:
            low, high = (low, middle) if z < Z else (middle, high)
        else:
            low, high = (middle, high) if z > -Z else (low, middle)
    return low if lower else high


def score_interval(gained: float, lost: float, n: float) -> tuple[float, float]:
    """95% Tango score interval for (gained - lost) / n; counts may be fractional (rescaled)."""
    if n <= 0:
        return (-1.0, 1.0)
    return (_bound(gained, lost, n, lower=True), _bound(gained, lost, n, lower=False))


def difference_interval(counts: PairedCounts) -> tuple[float, float]:
    """95% Tango score interval for candidate minus baseline; (-1, 1) with nothing paired."""
    return score_interval(counts.gained, counts.lost, counts.n)


def practical_drop(max_drop: float) -> float:
    """The smallest observed drop a REGRESSION reports: PRACTICAL_SHARE of the margin."""
    return max_drop * PRACTICAL_SHARE


def classify(counts: PairedCounts, max_drop: float) -> tuple[Finding, float, tuple[float, float]]:
    """The finding for one filter, with the McNemar p-value and the interval behind it."""
    p_value = mcnemar_exact_p(counts.lost, counts.gained)
    interval = difference_interval(counts)
    if counts.n and p_value < ALPHA and counts.difference < -practical_drop(max_drop):
        return Finding.REGRESSION, p_value, interval
    if counts.n and interval[0] > -max_drop:
        return Finding.EQUIVALENT, p_value, interval
    return Finding.INCONCLUSIVE, p_value, interval


def _settled(counts: PairedCounts, size: int, max_drop: float) -> bool:
    """Would the rule decide with `size` questions in the same proportions?"""
    scale = size / counts.n
    if counts.difference > -practical_drop(max_drop):
        return score_interval(counts.gained * scale, counts.lost * scale, size)[0] > -max_drop
    lost, gained = round(counts.lost * scale), round(counts.gained * scale)
    if lost + gained > EXACT_LIMIT:  # the score interval and the exact test agree by then
        return score_interval(gained, lost, size)[1] < 0
    return mcnemar_exact_p(lost, gained) < ALPHA


def questions_to_settle(counts: PairedCounts, max_drop: float) -> int | None:
    """About how many paired questions, at the observed proportions, the rule needs to decide.

    None when nothing is paired, when the drop sits exactly at half the margin (neither side
    can be reached), or beyond SETTLE_CAP.
    """
    n = counts.n
    if n == 0 or math.isclose(counts.difference, -practical_drop(max_drop), abs_tol=1e-12):
        return None
    low, high = n, 2 * n
    while not _settled(counts, high, max_drop):
        if high > SETTLE_CAP:
            return None
        low, high = high, 2 * high
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if _settled(counts, middle, max_drop) else (middle, high)
    return high
