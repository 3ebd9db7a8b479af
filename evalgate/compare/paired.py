"""Two runs over the same questions: the paired statistics and the rule that reads them; and a
sweep against its baseline sweep, compare's rule per config with Holm's adjustment across them.

Per filter, each question answered in both runs is lost, gained, both right or both wrong; the
test counts questions, not answers, so a question asked twice (GPQA) is one cluster. The rule,
the method and its limits: docs/compare.md, "The verdict" and "Repeated questions".
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from enum import Enum
from fractions import Fraction
from statistics import NormalDist

import msgspec

from evalgate.errors import ExitCode

PRACTICAL_SHARE = 0.5
"""A REGRESSION's observed drop must reach this share of the margin (half: one point of two)."""
ALPHA = 0.05
"""Significance level of the test; the interval is the matching 1 - ALPHA = 95%."""
Z = NormalDist().inv_cdf(1 - ALPHA / 2)
_STEPS = 64


class Finding(Enum):
    """What a comparison found. Ordered from best to worst."""

    IMPROVED = "improved"
    EQUIVALENT = "equivalent"
    INCONCLUSIVE = "inconclusive"
    REGRESSION = "regression"

    @property
    def exit_code(self) -> ExitCode:
        return {
            Finding.IMPROVED: ExitCode.PASS,
            Finding.EQUIVALENT: ExitCode.PASS,
            Finding.INCONCLUSIVE: ExitCode.INCONCLUSIVE,
            Finding.REGRESSION: ExitCode.FAIL,
        }[self]

    @property
    def rank(self) -> int:
        """0 for the best finding; the worst of several findings has the highest rank."""
        return list(Finding).index(self)


class Cluster(msgspec.Struct, frozen=True):
    """The paired answers to one question asked several times (its repeats)."""

    answers: int
    lost: int
    gained: int


class PairedCounts(msgspec.Struct, frozen=True):
    """The 2x2 table of one filter over the answers both runs gave, and the questions they
    answer when a question is asked more than once."""

    both_right: int
    lost: int
    gained: int
    both_wrong: int
    clusters: tuple[Cluster, ...] = ()
    """One per question; empty when every answer is its own question (no repeats)."""

    def __post_init__(self) -> None:
        if self.clusters and (
            sum(c.answers for c in self.clusters) != self.n
            or sum(c.lost for c in self.clusters) != self.lost
            or sum(c.gained for c in self.clusters) != self.gained
        ):
            raise ValueError("the clusters do not add up to the table")

    @property
    def questions(self) -> int:
        """Questions paired: the clusters, or the answers when there are no repeats."""
        return len(self.clusters) if self.clusters else self.n

    @property
    def clustered(self) -> bool:
        """Was any question answered more than once (the statistics then cluster)?"""
        return any(c.answers > 1 for c in self.clusters)

    @property
    def n(self) -> int:
        return self.both_right + self.lost + self.gained + self.both_wrong

    @property
    def baseline_score(self) -> float:
        return (self.both_right + self.lost) / self.n if self.n else 0.0

    @property
    def candidate_score(self) -> float:
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
        inside = abs(_tango_z(gained, lost, n, middle)) < Z
        low, high = (low, middle) if inside == lower else (middle, high)
    return low if lower else high


def score_interval(gained: float, lost: float, n: float) -> tuple[float, float]:
    """95% Tango score interval for (gained - lost) / n; counts may be fractional (rescaled)."""
    if n <= 0:
        return (-1.0, 1.0)
    return (_bound(gained, lost, n, lower=True), _bound(gained, lost, n, lower=False))


def _sign_flip_tail(totals: Sequence[int], at_most: int) -> Fraction:
    """P[S <= at_most] for S = the sum of the totals T_k with independent fair signs, exactly."""
    sizes = Counter(abs(t) for t in totals if t)
    ways = {0: 1}  # sum of the signed totals -> sign patterns giving it
    for size, count in sizes.items():
        spread = [(size * (2 * j - count), math.comb(count, j)) for j in range(count + 1)]
        step: dict[int, int] = {}
        for total, w in ways.items():
            for shift, c in spread:
                step[total + shift] = step.get(total + shift, 0) + w * c
        ways = step
    tail = sum(w for total, w in ways.items() if total <= at_most)
    return Fraction(tail, 2 ** sum(sizes.values()))


def clustered_exact_p(totals: Sequence[int]) -> float:
    """Two-sided exact clustered McNemar p-value over per-question totals T_k (gained - lost)."""
    return float(min(Fraction(1), 2 * _sign_flip_tail(totals, -abs(sum(totals)))))


def one_sided_p(counts: PairedCounts, *, drop: bool) -> float:
    """Exact one-sided p-value of the paired test (per question when questions repeat), for a
    drop (`drop`) or for a gain."""
    if counts.clustered:
        totals = [c.gained - c.lost for c in counts.clusters]
    else:
        totals = [1] * counts.gained + [-1] * counts.lost
    observed = sum(totals)
    return float(_sign_flip_tail(totals, observed if drop else -observed))


def design_effect(counts: PairedCounts) -> float:
    """How many times the variance of gained - lost exceeds what independent answers would
    give, floored at 1; N/K (answers per question) when nothing flipped; 1 without repeats."""
    if not counts.clustered:
        return 1.0
    n, k = counts.n, counts.questions
    if counts.lost + counts.gained == 0 or k < 2:
        return n / k
    d = counts.difference
    rest = n - counts.lost - counts.gained
    independent = (
        n / (n - 1) * (counts.lost * (1 + d) ** 2 + counts.gained * (1 - d) ** 2 + rest * d * d)
    )
    if independent == 0:  # every answer flipped the same way: nothing varies to compare
        return n / k
    robust = k / (k - 1) * sum((c.gained - c.lost - c.answers * d) ** 2 for c in counts.clusters)
    return max(1.0, robust / independent)


def difference_interval(counts: PairedCounts) -> tuple[float, float]:
    """95% Tango score interval for candidate minus baseline, on the counts divided by the
    design effect when questions repeat; (-1, 1) with nothing paired."""
    effect = design_effect(counts)
    return score_interval(counts.gained / effect, counts.lost / effect, counts.n / effect)


def practical_drop(max_drop: float) -> float:
    """The smallest observed drop a REGRESSION reports: PRACTICAL_SHARE of the margin."""
    return max_drop * PRACTICAL_SHARE


def decide(
    counts: PairedCounts,
    interval: tuple[float, float],
    max_drop: float,
    *,
    drop_significant: bool,
    gain_significant: bool,
) -> Finding:
    """The rule, given what the test found significant (compare's own test, or a sweep's
    adjusted one) and the interval."""
    if counts.n and drop_significant and counts.difference < -practical_drop(max_drop):
        return Finding.REGRESSION
    if counts.n and gain_significant and counts.difference > practical_drop(max_drop):
        return Finding.IMPROVED
    if counts.n and interval[0] > -max_drop:
        return Finding.EQUIVALENT
    return Finding.INCONCLUSIVE


def classify(counts: PairedCounts, max_drop: float) -> tuple[Finding, float, tuple[float, float]]:
    """The finding for one filter, with the p-value (exact McNemar, or its clustered form when
    questions repeat) and the interval behind it."""
    if counts.clustered:
        p_value = clustered_exact_p([c.gained - c.lost for c in counts.clusters])
    else:
        p_value = mcnemar_exact_p(counts.lost, counts.gained)
    interval = difference_interval(counts)
    significant = p_value < ALPHA
    finding = decide(
        counts, interval, max_drop, drop_significant=significant, gain_significant=significant
    )
    return finding, p_value, interval


# A sweep: Holm, so that 200 unchanged configs do not fail a sweep by chance; why Holm and
# one-sided: docs/verify.md, "Many configs, many tests".


class FilterPair(msgspec.Struct, frozen=True):
    """One gated filter of a config, paired with the baseline's."""

    filter: str
    counts: PairedCounts
    interval: tuple[float, float]
    finding: Finding


class ConfigPair(msgspec.Struct, frozen=True):
    """One config of the sweep, paired with the same config of the baseline."""

    key: str
    finding: Finding
    """The worst of its filters' findings."""
    filters: tuple[FilterPair, ...]
    p_drop: float
    """The config's one-sided p-value for a drop (Bonferroni over its filters)."""
    adjusted_drop: float
    """p_drop after Holm's adjustment over the sweep: significant below ALPHA."""
    adjusted_gain: float

    @property
    def deciding(self) -> FilterPair:
        """The filter whose finding is the config's (the largest drop among equals)."""
        worst = [f for f in self.filters if f.finding is self.finding]
        return min(worst, key=lambda f: f.counts.difference)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given: the i-th smallest times
    (m - i + 1), never below the one before it, at most 1."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [1.0] * len(p_values)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def config_p(filters: Mapping[str, PairedCounts], *, drop: bool) -> float:
    """A config's one-sided p-value: its filters' smallest, times their number, at most 1."""
    if not filters:
        return 1.0
    smallest = min(one_sided_p(counts, drop=drop) for counts in filters.values())
    return min(1.0, len(filters) * smallest)


def judge_pairs(
    pairs: Mapping[str, Mapping[str, PairedCounts]], max_drop: float
) -> list[ConfigPair]:
    """Every config's finding against its baseline, the sweep's multiplicity accounted for;
    `pairs` maps a config's key to its gated filters' paired tables."""
    keys = list(pairs)
    drops = [config_p(pairs[key], drop=True) for key in keys]
    gains = [config_p(pairs[key], drop=False) for key in keys]
    judged = []
    for key, p_drop, adj_drop, adj_gain in zip(keys, drops, holm(drops), holm(gains), strict=True):
        filters = []
        for name, counts in pairs[key].items():
            interval = difference_interval(counts)
            finding = decide(
                counts,
                interval,
                max_drop,
                drop_significant=adj_drop < ALPHA,
                gain_significant=adj_gain < ALPHA,
            )
            filters.append(FilterPair(name, counts, interval, finding))
        worst = max(
            (f.finding for f in filters), key=lambda f: f.rank, default=Finding.INCONCLUSIVE
        )
        judged.append(ConfigPair(key, worst, tuple(filters), p_drop, adj_drop, adj_gain))
    return judged
