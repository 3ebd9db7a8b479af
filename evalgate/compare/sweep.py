"""A sweep against its baseline sweep: compare's rule per config, Holm's adjustment across them.

Holm, so that 200 unchanged configs do not fail a sweep by chance; why Holm and one-sided:
docs/verify.md, "Many configs, many tests".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from evalgate.compare.paired import (
    ALPHA,
    Finding,
    PairedCounts,
    decide,
    difference_interval,
    one_sided_p,
)


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
    pairs: Mapping[str, Mapping[str, PairedCounts]],
    max_drop: float,
    alpha: float = ALPHA,
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
                drop_significant=adj_drop < alpha,
                gain_significant=adj_gain < alpha,
            )
            filters.append(FilterPair(name, counts, interval, finding))
        worst = max(
            (f.finding for f in filters), key=lambda f: f.rank, default=Finding.INCONCLUSIVE
        )
        judged.append(ConfigPair(key, worst, tuple(filters), p_drop, adj_drop, adj_gain))
    return judged
