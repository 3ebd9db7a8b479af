"""Seeded simulations of the two statistical rules, no HTTP: the sequential gate and compare's rule.

Used by tests/gate/test_sequential.py and tests/compare/test_paired.py (which assert the rates)
and benchmarks/suite.py (which records them in BENCHMARKS.md), so the figures recorded are
the ones tested.

The sequential gate (evalgate.gate.sequential): each simulated run reads up to 1319 answers to
two filters that agree on every answer (the worst case for a false PASS: both are above together).
Answers are drawn independently at a true accuracy, or, with `population`, as a shuffled fixed set
of floor(accuracy * 1319) right answers (a GSM8K run's own situation). With `concurrency`, the
answers come from a simulated engine serving that many requests at once (each slot takes every
concurrency-th question in dispatch order); a right answer takes 1 to 2 time units, a wrong one
`slow` times longer (wrong answers run on to the output budget), so wrong answers arrive late.
The gate reads them in dispatch order, as the completed prefix grows (PrefixReader);
`read="arrival"` reads them as they arrive instead, to show what that costs. The runs are
vectorised over numpy arrays against SequentialTest's own bounds; `prefix_reader_agrees` feeds
PrefixReader itself each run's answers in arrival order and counts any run it decides otherwise.

compare's rule (evalgate.compare.paired.classify): full GSM8K, 3% of questions flipping between two
runs of the same model (1.5% lost, 1.5% gained); a true drop of d adds d to the lost share.

A sweep against its baseline (evalgate.compare.paired.judge_pairs): 200 configs of full GSM8K, each
with two gated filters that agree on every answer (the worst case for the Bonferroni factor over
filters), 3% of questions flipping as above; one config may carry a true drop.

compare on repeated questions: GPQA-diamond as the harness asks it (198 questions, each twice),
two runs of the same model (no true change) in which 20% of the questions flip (half lost, half
gained); a flipped question flips in both its repeats with probability `together` (else in one),
and each pair of runs is judged by the clustered rule and by the naive one that counts every
answer as independent.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

import numpy as np

from evalgate.compare import paired
from evalgate.compare.paired import (
    Cluster,
    Finding,
    PairedCounts,
    classify,
    difference_interval,
    one_sided_p,
)
from evalgate.environment import DEFAULT_MAX_DROP
from evalgate.gate.sequential import DEFAULT_ALPHA, EarlyStop, PrefixReader, SequentialTest

RUNS = 2000
"""Seeded runs each simulation the tests assert draws."""
QUESTIONS = 1319
FILTERS = ("strict-match", "flexible-extract")
FLIP_RATE = 0.03


@dataclass(frozen=True)
class GateRates:
    """How simulated runs of the sequential gate ended."""

    accuracy: float
    runs: int
    passed: float
    """Share of runs stopped early with PASS."""
    failed: float
    """Share of runs stopped early with FAIL."""
    used: tuple[int, ...]
    """Answers read when each run stopped (QUESTIONS when it did not)."""
    asked: tuple[int, ...]
    """Requests sent when each run stopped (the answers read plus those in flight)."""

    @property
    def median_used(self) -> float:
        return statistics.median(self.used)

    @property
    def median_asked(self) -> float:
        return statistics.median(self.asked)


def _answers(rng: np.random.Generator, accuracy: float, population: bool, runs: int) -> Any:
    """A runs x QUESTIONS array of answers (True right) in dispatch order."""
    if population:
        right = int(accuracy * QUESTIONS)
        base = np.arange(QUESTIONS) < right
        return np.stack([rng.permutation(base) for _ in range(runs)])
    return rng.random((runs, QUESTIONS)) < accuracy


def _bounds(test: SequentialTest) -> tuple[Any, Any]:
    pairs = [test.bounds(n) for n in range(1, QUESTIONS + 1)]
    return np.array([a for a, _ in pairs]), np.array([b for _, b in pairs])


_SAME = {right: dict.fromkeys(FILTERS, right) for right in (True, False)}


def _first_certain(test: SequentialTest, answers: Any) -> tuple[Any, Any]:
    """Per run (row): the first count of answers read at which the test is certain (0: never),
    and whether that is a FAIL. Vectorised; the same bounds SequentialTest.outcome compares
    with (the filters agree, so one count stands for both)."""
    above, below = _bounds(test)
    right = np.cumsum(answers, axis=1)
    never = np.zeros_like(right, dtype=bool)
    passes = right >= above if test.mode != "fail" else never
    fails = right <= below if test.mode != "pass" else never
    certain = passes | fails
    hit = certain.any(axis=1)
    first = np.where(hit, certain.argmax(axis=1) + 1, 0)
    failed = hit & fails[np.arange(len(first)), np.maximum(first - 1, 0)]
    return first, failed


def serve(rng: np.random.Generator, answers: Any, concurrency: int, slow: float) -> Any:
    """(start, finish) times per request: each of `concurrency` slots takes every
    concurrency-th question in dispatch order, one after the other; a right answer takes 1 to 2
    time units, a wrong one `slow` times as long."""
    runs, count = answers.shape
    latency = (1 + rng.random((runs, count))) * np.where(answers, 1.0, slow)
    lanes = -(-count // concurrency) * concurrency
    padded = np.zeros((runs, lanes))
    padded[:, :count] = latency
    finish = np.cumsum(padded.reshape(runs, -1, concurrency), axis=1).reshape(runs, lanes)
    start = finish - padded
    return start[:, :count], finish[:, :count]


def _read(
    test: SequentialTest, answers: Any, start: Any, finish: Any, read: str
) -> tuple[list[str | None], list[int], list[int]]:
    """Outcome, answers read and requests sent at the stop, for every run."""
    runs, count = answers.shape
    rows = np.arange(runs)
    if read == "arrival":
        order = np.argsort(finish, axis=1, kind="stable")
        first, failed = _first_certain(test, np.take_along_axis(answers, order, axis=1))
        known = np.take_along_axis(finish, order, axis=1)[rows, np.maximum(first - 1, 0)]
    else:
        first, failed = _first_certain(test, answers)
        # The prefix of n answers is complete when the last of them has arrived.
        complete = np.maximum.accumulate(finish, axis=1)
        known = complete[rows, np.maximum(first - 1, 0)]
    sent = (start < known[:, None]).sum(axis=1)  # a slot freed by the deciding answer stays idle
    outcomes = [
        None if not f else ("fail" if x else "pass") for f, x in zip(first, failed, strict=True)
    ]
    used = [int(f) if f else count for f in first]
    asked = [int(s) if f else count for f, s in zip(first, sent, strict=True)]
    return outcomes, used, asked


def prefix_reader_agrees(runs: int, seed: int, accuracy: float = 0.90) -> int:
    """Feed PrefixReader each simulated run's answers in their arrival order; return how many
    runs it decided differently from reading them in dispatch order (0 when it is right)."""
    generator = np.random.default_rng(seed)
    test = SequentialTest(0.90, FILTERS)
    answers = _answers(generator, accuracy, False, runs)
    _, finish = serve(generator, answers, 64, 4.0)
    first, failed = _first_certain(test, answers)
    wrong = 0
    for row in range(runs):
        reader = PrefixReader(test)
        decision = None
        for position in np.argsort(finish[row], kind="stable").tolist():
            decision = reader.arrive(position, _SAME[bool(answers[row, position])])
            if decision is not None:
                break
        expected = (None, 0) if not first[row] else ("fail" if failed[row] else "pass", first[row])
        got = (None, 0) if decision is None else (decision.outcome, decision.n)
        wrong += got != expected
    return wrong


def simulate_gate(
    accuracy: float,
    *,
    runs: int,
    seed: int,
    threshold: float = 0.90,
    alpha: float = DEFAULT_ALPHA,
    mode: EarlyStop = "both",
    population: bool = False,
    concurrency: int | None = None,
    slow: float = 4.0,
    read: Literal["dispatch", "arrival"] = "dispatch",
) -> GateRates:
    """`runs` seeded runs of the sequential gate at a true `accuracy`."""
    generator = np.random.default_rng(seed)
    test = SequentialTest(threshold, FILTERS, mode=mode, alpha=alpha)
    answers = _answers(generator, accuracy, population, runs)
    if concurrency is None:
        finish = np.cumsum(np.ones(answers.shape), axis=1)  # one at a time
        start = finish - 1
    else:
        start, finish = serve(generator, answers, concurrency, slow)
    outcomes, used, asked = _read(test, answers, start, finish, read)
    return GateRates(
        accuracy,
        runs,
        outcomes.count("pass") / runs,
        outcomes.count("fail") / runs,
        tuple(used),
        tuple(asked),
    )


@dataclass(frozen=True)
class CompareRates:
    """How often compare's rule found each finding over simulated pairs of full runs."""

    drop: float
    runs: int
    equivalent: float
    regression: float
    inconclusive: float
    improved: float


@cache
def _finding(lost: int, gained: int, n: int, max_drop: float) -> Finding:
    # The finding depends on the table only through n, lost and gained.
    return classify(PairedCounts(n - lost - gained, lost, gained, 0), max_drop)[0]


def simulate_compare(
    drop: float,
    *,
    runs: int,
    seed: int,
    flip_rate: float = FLIP_RATE,
    max_drop: float = DEFAULT_MAX_DROP,
    questions: int = QUESTIONS,
) -> CompareRates:
    """`runs` seeded pairs of runs whose true accuracies differ by `drop` (0.02: two points)."""
    rng = np.random.default_rng(seed)
    lost_share, gained_share = flip_rate / 2 + drop, flip_rate / 2
    cells = rng.multinomial(
        questions, [lost_share, gained_share, 1 - lost_share - gained_share], runs
    )
    found = {finding: 0 for finding in Finding}
    for lost, gained, _ in cells.tolist():
        found[_finding(lost, gained, questions, max_drop)] += 1
    return CompareRates(
        drop,
        runs,
        found[Finding.EQUIVALENT] / runs,
        found[Finding.REGRESSION] / runs,
        found[Finding.INCONCLUSIVE] / runs,
        found[Finding.IMPROVED] / runs,
    )


GPQA_QUESTIONS = 198
GPQA_REPEATS = 2
GPQA_FLIP_RATE = 0.20


@dataclass(frozen=True)
class RepeatRates:
    """compare's rule on simulated pairs of runs of a task asking every question twice."""

    together: float
    runs: int
    clustered: CompareRates
    """The repeats of a question one cluster (evalgate's rule)."""
    naive: CompareRates
    """Every answer counted as independent (the rule without clusters)."""


@cache
def _repeat_finding(
    split: tuple[int, int, int, int], questions: int, max_drop: float, clustered: bool
) -> Finding:
    # The finding depends only on how many questions lost or gained one or both repeats.
    lost_one, lost_both, gained_one, gained_both = split
    clusters = [Cluster(2, 1, 0)] * lost_one + [Cluster(2, 2, 0)] * lost_both
    clusters += [Cluster(2, 0, 1)] * gained_one + [Cluster(2, 0, 2)] * gained_both
    clusters += [Cluster(2, 0, 0)] * (questions - len(clusters))
    lost, gained = lost_one + 2 * lost_both, gained_one + 2 * gained_both
    counts = PairedCounts(
        2 * questions - lost - gained, lost, gained, 0, tuple(clusters) if clustered else ()
    )
    return classify(counts, max_drop)[0]


def simulate_compare_repeats(
    together: float,
    *,
    runs: int,
    seed: int,
    flip_rate: float = GPQA_FLIP_RATE,
    max_drop: float = DEFAULT_MAX_DROP,
    questions: int = GPQA_QUESTIONS,
) -> RepeatRates:
    """`runs` seeded pairs of runs with no true change, each question asked twice; a flipped
    question flips in both repeats (the same way) with probability `together`."""
    rng = np.random.default_rng(seed)
    found = {rule: dict.fromkeys(Finding, 0) for rule in (True, False)}
    for _ in range(runs):
        state = rng.choice(3, size=questions, p=[flip_rate / 2, flip_rate / 2, 1 - flip_rate])
        both = rng.random(questions) < together
        split = (
            int(((state == 0) & ~both).sum()),
            int(((state == 0) & both).sum()),
            int(((state == 1) & ~both).sum()),
            int(((state == 1) & both).sum()),
        )
        for rule in (True, False):
            found[rule][_repeat_finding(split, questions, max_drop, rule)] += 1

    def rates(rule: bool) -> CompareRates:
        share = {finding: count / runs for finding, count in found[rule].items()}
        return CompareRates(
            0.0,
            runs,
            share[Finding.EQUIVALENT],
            share[Finding.REGRESSION],
            share[Finding.INCONCLUSIVE],
            share[Finding.IMPROVED],
        )

    return RepeatRates(together, runs, rates(True), rates(False))


SWEEP_CONFIGS = 200


@dataclass(frozen=True)
class SweepRates:
    """How often a simulated sweep against its baseline reported a REGRESSION."""

    drop: float
    """The true drop of the sweep's first config (0: no config changed)."""
    runs: int
    any_regression: float
    """Share of sweeps with any REGRESSION: a failed sweep."""
    found: float
    """Share of sweeps in which the dropped config is a REGRESSION."""
    false: float
    """Share of sweeps with a REGRESSION among the unchanged configs."""


def simulate_sweep(
    drop: float,
    *,
    runs: int,
    seed: int,
    configs: int = SWEEP_CONFIGS,
    flip_rate: float = FLIP_RATE,
    max_drop: float = DEFAULT_MAX_DROP,
    questions: int = QUESTIONS,
) -> SweepRates:
    """`runs` seeded sweeps of `configs` configs judged by judge_pairs; the first config's true
    accuracy is `drop` below its baseline's, the others' unchanged."""
    rng = np.random.default_rng(seed)
    shares = [flip_rate / 2, flip_rate / 2, 1 - flip_rate]
    dropped = [flip_rate / 2 + drop, flip_rate / 2, 1 - flip_rate - drop]
    failed = found = false = 0
    # The same statistics, each table computed once: the sweep repeats few distinct tables.
    saved = (paired.difference_interval, paired.one_sided_p)
    paired.difference_interval = cache(difference_interval)  # type: ignore[assignment]
    paired.one_sided_p = cache(one_sided_p)  # type: ignore[assignment]
    try:
        for _ in range(runs):
            cells = rng.multinomial(questions, shares, configs)
            cells[0] = rng.multinomial(questions, dropped)
            pairs = {}
            for index, (lost, gained, rest) in enumerate(cells.tolist()):
                counts = PairedCounts(rest, lost, gained, 0)
                pairs[str(index)] = dict.fromkeys(FILTERS, counts)
            regressed = {
                c.key
                for c in paired.judge_pairs(pairs, max_drop)
                if c.finding is Finding.REGRESSION
            }
            failed += bool(regressed)
            found += "0" in regressed
            false += bool(regressed - {"0"})
    finally:
        paired.difference_interval, paired.one_sided_p = saved
    return SweepRates(drop, runs, failed / runs, found / runs, false / runs)


SWEEP_DROPS = (0.0, 0.03, 0.04)
"""The sweep table's lines: no change, one config 3 points down, one 4 points down."""


def sweep_rates(runs: int = 2000) -> list[SweepRates]:
    """The sweep rule at each of SWEEP_DROPS, seeded (seed 1700 + its index)."""
    return [simulate_sweep(d, runs=runs, seed=1700 + i) for i, d in enumerate(SWEEP_DROPS)]


def sweep_table(rates: Sequence[SweepRates]) -> str:
    """The sweep rule's operating characteristics as a markdown table."""
    lines = [
        "| true change | sweeps failed (any REGRESSION) | the dropped config found | "
        "a REGRESSION among the unchanged |",
        "| --- | --- | --- | --- |",
    ]
    for r in rates:
        change = "none" if r.drop == 0 else f"one config -{r.drop * 100:g} points"
        found = "-" if r.drop == 0 else f"{r.found:.1%}"
        lines.append(f"| {change} | {r.any_regression:.1%} | {found} | {r.false:.1%} |")
    return "\n".join(lines) + "\n"


# -- the tables docs/compare.md and BENCHMARKS.md show -----------------------------------------

TOGETHER = (1.0, 0.5, 0.0)
"""How often a flipped GPQA question flips in both repeats, in the repeats table."""


def repeat_rates(runs: int = 2000) -> list[RepeatRates]:
    """compare on GPQA-shaped runs at each of TOGETHER, seeded (seed 1600 + its index)."""
    return [
        simulate_compare_repeats(together, runs=runs, seed=1600 + i)
        for i, together in enumerate(TOGETHER)
    ]


def repeat_table(rates: Sequence[RepeatRates]) -> str:
    """No true change, questions asked twice: the clustered rule against the naive one."""
    lines = [
        "| flipped questions flipping in both repeats | REGRESSION, clustered | REGRESSION, "
        "naive | EQUIVALENT, clustered | EQUIVALENT, naive |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in rates:
        lines.append(
            f"| {r.together:.0%} | {r.clustered.regression:.1%} | {r.naive.regression:.1%} | "
            f"{r.clustered.equivalent:.1%} | {r.naive.equivalent:.1%} |"
        )
    return "\n".join(lines) + "\n"


DROPS = (0.0, 0.005, 0.01, 0.02, 0.03)
"""True drops in accuracy the compare table shows (0.02: two points)."""


def compare_rates(runs: int = 2000) -> list[CompareRates]:
    """compare's rule at each of DROPS, seeded (seed 1400 + its index)."""
    return [simulate_compare(drop, runs=runs, seed=1400 + i) for i, drop in enumerate(DROPS)]


def compare_table(rates: Sequence[CompareRates]) -> str:
    """The operating characteristics as a markdown table."""
    lines = [
        "| true change | IMPROVED | EQUIVALENT | INCONCLUSIVE | REGRESSION |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in rates:
        change = "none" if r.drop == 0 else f"-{r.drop * 100:g} points"
        lines.append(
            f"| {change} | {r.improved:.1%} | {r.equivalent:.1%} | {r.inconclusive:.1%} | "
            f"{r.regression:.1%} |"
        )
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class GateScenario:
    """One line of the sequential gate's table."""

    name: str
    rates: GateRates


def gate_scenarios(runs: int = 2000) -> list[GateScenario]:
    """The sequential gate's figures: error rates at and below the threshold, questions used."""
    cases: list[tuple[str, float, dict[str, Any]]] = [
        ("0.90: answers drawn at the threshold", 0.90, {}),
        ("0.8999: a shuffled set of 1187 right of 1319", 0.90, {"population": True}),
        ("0.90: 64 in flight, wrong answers 4x slower", 0.90, {"concurrency": 64}),
        ("0.88: 64 in flight, wrong answers 4x slower", 0.88, {"concurrency": 64}),
        (
            "0.88: the same, answers read as they arrive (not evalgate's rule)",
            0.88,
            {"concurrency": 64, "read": "arrival"},
        ),
        ("0.97", 0.97, {}),
        ("0.97: 8 in flight", 0.97, {"concurrency": 8}),
        ("0.97: 64 in flight", 0.97, {"concurrency": 64}),
        ("0.0", 0.0, {}),
        ("0.0: 8 in flight", 0.0, {"concurrency": 8}),
    ]
    return [
        GateScenario(name, simulate_gate(accuracy, runs=runs, seed=1500 + i, **setup))
        for i, (name, accuracy, setup) in enumerate(cases)
    ]


def gate_table(scenarios: Sequence[GateScenario]) -> str:
    """The sequential gate's figures as a markdown table."""
    lines = [
        "| true accuracy (threshold 0.90, --early-stop both, alpha 0.05) | runs | early PASS "
        "| early FAIL | answers read: median (max) | requests sent: median (max) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for s in scenarios:
        r = s.rates
        lines.append(
            f"| {s.name} | {r.runs} | {r.passed:.2%} | {r.failed:.2%} | "
            f"{r.median_used:g} ({max(r.used)}) | {r.median_asked:g} ({max(r.asked)}) |"
        )
    return "\n".join(lines) + "\n"
