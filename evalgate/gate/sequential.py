"""The sequential gate: stop asking questions once the answers so far make the verdict certain.

An anytime-valid test (a Beta-mixture e-process), so a stop at any n keeps the error rate at
alpha; answers are read in dispatch order, never arrival order (wrong answers come back later).
The method and its guarantees: docs/early-stop.md.
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Mapping, Sequence
from typing import Literal

import msgspec

EarlyStop = Literal["off", "fail", "pass", "both"]
Outcome = Literal["pass", "fail"]
Side = Literal["above", "below"]

DEFAULT_ALPHA = 0.05
PRIOR_WEIGHT = 10.0
"""a + b of the Beta prior, in questions."""
ORDER_SEED = 1234
"""Seed of the dispatch order (random.Random(ORDER_SEED).shuffle of the question positions)."""


def dispatch_order(count: int, seed: int = ORDER_SEED) -> list[int]:
    """The order the questions are sent in: a seeded shuffle of 0 .. count - 1."""
    order = list(range(count))
    random.Random(seed).shuffle(order)  # noqa: S311 - a reproducible order, not a secret
    return order


def _log_beta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def log_e_value(right: int, wrong: int, threshold: float, weight: float = PRIOR_WEIGHT) -> float:
    """log E_n(threshold) for `right` right and `wrong` wrong answers (0 with none)."""
    if not 0 < threshold < 1:
        raise ValueError(f"threshold {threshold} is not strictly between 0 and 1")
    a, b = weight * threshold, weight * (1 - threshold)
    return (
        _log_beta(a + right, b + wrong)
        - _log_beta(a, b)
        - right * math.log(threshold)
        - wrong * math.log1p(-threshold)
    )


class FilterState(msgspec.Struct, frozen=True):
    """One filter after n answers: its count, its evidence, and which side it is certain of."""

    filter: str
    right: int
    n: int
    e_value: float
    """E_n(threshold); float('inf') beyond what a float holds."""
    certain: Side | None

    @property
    def score(self) -> float:
        return self.right / self.n if self.n else 0.0


class Decision(msgspec.Struct, frozen=True):
    """What the test says after n answers: a verdict, or None while it is not certain."""

    outcome: Outcome | None
    n: int
    filters: tuple[FilterState, ...]

    def reason(self, threshold: float, total: int, alpha: float) -> str:
        """One line for the result: what became certain, after how many answers."""
        if self.outcome is None:
            return f"not certain after {self.n} of {total} questions"
        side = "above" if self.outcome == "pass" else "below"
        shown = [f for f in self.filters if f.certain == side]
        listed = ", ".join(f"{f.filter} {f.score:.4f} (e-value {f.e_value:.4g})" for f in shown)
        return (
            f"stopped early after {self.n} of {total} questions: {listed} certainly {side} "
            f"threshold {threshold:.4f} (alpha {alpha})"
        )


class SequentialTest:
    """The test for one threshold, set of filters, mode and alpha (the module docstring)."""

    def __init__(
        self,
        threshold: float,
        filters: Sequence[str],
        *,
        mode: EarlyStop = "both",
        alpha: float = DEFAULT_ALPHA,
        weight: float = PRIOR_WEIGHT,
    ) -> None:
        if not 0 < alpha < 1:
            raise ValueError(f"alpha {alpha} is not strictly between 0 and 1")
        if not filters:
            raise ValueError("the sequential test needs at least one gated filter")
        self.threshold = threshold
        self.filters = tuple(filters)
        self.mode = mode
        self.alpha = alpha
        self.weight = weight
        self.active = mode != "off" and 0 < threshold < 1
        self._pass_level = math.log(1 / alpha)
        self._fail_level = math.log(len(self.filters) / alpha)
        self._above: list[int] = []
        self._below: list[int] = []

    def e_value(self, right: int, n: int) -> float:
        """E_n(threshold) for `right` of `n`."""
        if not 0 < self.threshold < 1:
            return 1.0
        log_e = self._log_e(right, n)
        return math.exp(log_e) if log_e < 700 else math.inf

    def bounds(self, n: int) -> tuple[int, int]:
        """(fewest right answers certainly above, most right answers certainly below) after n.

        n + 1 and -1 when no count is. log E_n is convex in s and at most 0 at s = t n, so each
        side's certain counts form one run, found by bisection (once per n, then kept)."""
        while len(self._above) <= n:
            size = len(self._above)
            self._above.append(self._above_from(size))
            self._below.append(self._below_to(size))
        return self._above[n], self._below[n]

    def _log_e(self, right: int, n: int) -> float:
        return log_e_value(right, n - right, self.threshold, self.weight)

    def _above_from(self, n: int) -> int:
        counts = range(math.floor(self.threshold * n) + 1, n + 1)  # the s with s / n > t
        if not counts or self._log_e(n, n) < self._pass_level:
            return n + 1
        certain = bisect.bisect_left(
            counts, True, key=lambda s: self._log_e(s, n) >= self._pass_level
        )
        return counts[certain]

    def _below_to(self, n: int) -> int:
        counts = range(math.ceil(self.threshold * n))  # the s with s / n < t
        if not counts or self._log_e(0, n) < self._fail_level:
            return -1
        return (
            bisect.bisect_left(counts, True, key=lambda s: self._log_e(s, n) < self._fail_level) - 1
        )

    def side(self, right: int, n: int) -> Side | None:
        """Which side of the threshold `right` of `n` is certain of, if any."""
        if n <= 0 or not 0 < self.threshold < 1:
            return None
        above, below = self.bounds(n)
        if right >= above:
            return "above"
        if right <= below:
            return "below"
        return None

    def outcome(self, right: Mapping[str, int], n: int) -> Outcome | None:
        """The verdict after `n` answers with `right[filter]` right per filter, once certain."""
        if not self.active or n <= 0:
            return None
        above, below = self.bounds(n)
        counts = [right[f] for f in self.filters]
        if self.mode != "pass" and min(counts) <= below:
            return "fail"
        if self.mode != "fail" and min(counts) >= above:
            return "pass"
        return None

    def decide(self, right: Mapping[str, int], n: int) -> Decision:
        """The decision after `n` answers, with each filter's evidence."""
        states = tuple(
            FilterState(f, right[f], n, self.e_value(right[f], n), self.side(right[f], n))
            for f in self.filters
        )
        return Decision(self.outcome(right, n), n, states)


class PrefixReader:
    """Answers arrive in any order; the test reads them in dispatch order, position by position.

    A failed request (None) is read as wrong; the first certain prefix is kept."""

    def __init__(self, test: SequentialTest) -> None:
        self.test = test
        self.waiting: dict[int, Mapping[str, bool] | None] = {}
        self.n = 0
        self.right = dict.fromkeys(test.filters, 0)
        self.decision: Decision | None = None

    def arrive(self, position: int, correct: Mapping[str, bool] | None) -> Decision | None:
        """Record the answer at `position` (0-based, in dispatch order)."""
        if self.decision is not None:
            return self.decision
        self.waiting[position] = correct
        while self.n in self.waiting:
            answer = self.waiting.pop(self.n)
            self.n += 1
            for name in self.right:
                self.right[name] += int(bool(answer and answer.get(name)))
            if self.test.outcome(self.right, self.n) is not None:
                self.decision = self.test.decide(self.right, self.n)
                return self.decision
        return None

    def current(self) -> Decision:
        """The decision (or the state, when none) over the prefix read so far."""
        return self.decision or self.test.decide(self.right, self.n)


def replay(test: SequentialTest, answers: Sequence[Mapping[str, bool] | None]) -> Decision:
    """The decision over answers already in dispatch order (None: a failed request)."""
    reader = PrefixReader(test)
    for position, answer in enumerate(answers):
        if reader.arrive(position, answer) is not None:
            break
    return reader.current()


def judge_stopped(right: int, n: int, threshold: float, filters: int, alpha: float) -> Side | None:
    """For a result that stopped early: which side of `threshold` one filter's `right` of `n` is
    certain of, at the run's alpha with `filters` gated filters (None: not certain). Valid for
    any threshold at the stopping point: the confidence sequence holds at every n and theta."""
    if not 0 < threshold < 1 or n <= 0:
        return None
    names = [f"filter {i}" for i in range(max(filters, 1))]
    return SequentialTest(threshold, names, alpha=alpha).side(right, n)
