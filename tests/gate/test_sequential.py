"""The sequential gate's statistic, bounds and reading order, against independent computations."""

from __future__ import annotations

import math

import pytest
from scipy import integrate
from scipy.stats import beta as beta_distribution

from evalgate.gate.sequential import (
    DEFAULT_ALPHA,
    PRIOR_WEIGHT,
    PrefixReader,
    SequentialTest,
    dispatch_order,
    log_e_value,
)
from tests.simulation import (
    RUNS,
    prefix_reader_agrees,
    simulate_gate,
)

pytestmark = pytest.mark.unit


FILTERS = ("strict-match", "flexible-extract")


def _e_by_integration(right: int, wrong: int, threshold: float) -> float:
    """E_n(t) as the integral it is: the Beta-mixture likelihood over the likelihood at t."""
    a, b = PRIOR_WEIGHT * threshold, PRIOR_WEIGHT * (1 - threshold)

    def ratio(q: float) -> float:
        return (
            (q / threshold) ** right
            * ((1 - q) / (1 - threshold)) ** wrong
            * beta_distribution.pdf(q, a, b)
        )

    value, _ = integrate.quad(ratio, 0, 1, limit=200, points=[threshold])
    return value


@pytest.mark.parametrize(
    ("right", "wrong", "threshold"),
    [(0, 0, 0.9), (10, 0, 0.9), (0, 3, 0.9), (45, 5, 0.9), (28, 2, 0.9), (3, 7, 0.3), (6, 14, 0.5)],
)
def test_e_value_is_the_beta_mixture_likelihood_ratio(right, wrong, threshold):
    expected = _e_by_integration(right, wrong, threshold)
    assert math.exp(log_e_value(right, wrong, threshold)) == pytest.approx(expected, rel=1e-6)


def test_no_answer_is_no_evidence():
    assert log_e_value(0, 0, 0.9) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("threshold", [0.0, 1.0, -0.1, 1.5])
def test_a_threshold_outside_the_open_interval_is_refused(threshold):
    with pytest.raises(ValueError, match="not strictly between 0 and 1"):
        log_e_value(1, 1, threshold)


@pytest.mark.parametrize(
    ("n", "above", "below"),
    [
        (1, 2, -1),  # one answer decides nothing
        (4, 5, -1),  # four wrong: E = 9 B(9, 5) / 0.1^4 = 14.0 < 40
        (5, 6, 0),  # five wrong: E = 9 B(9, 6) / 0.1^5 = 50.0 >= 2 / 0.05
        (6, 7, 0),
        (10, 11, 3),
        (50, 50, 36),  # fifty right of fifty: certainly above
        (100, 98, 78),
        (200, 192, 164),
        (1319, 1222, 1146),
    ],
)
def test_bounds_at_090(n, above, below):
    test = SequentialTest(0.90, FILTERS)
    assert test.bounds(n) == (above, below)


@pytest.mark.parametrize("n", [5, 6, 10, 50, 100, 333, 1319])
def test_bounds_are_where_the_e_value_crosses_its_level(n):
    """The fewest right answers certainly above and the most certainly below, by brute force."""
    test = SequentialTest(0.90, FILTERS, alpha=0.05)
    level_pass, level_fail = 1 / 0.05, 2 / 0.05
    passing = [s for s in range(n + 1) if s > 0.9 * n and test.e_value(s, n) >= level_pass]
    failing = [s for s in range(n + 1) if s < 0.9 * n and test.e_value(s, n) >= level_fail]
    above, below = test.bounds(n)
    assert above == (min(passing) if passing else n + 1)
    assert below == (max(failing) if failing else -1)
    assert passing == list(range(above, n + 1))
    assert failing == list(range(below + 1))


@pytest.mark.parametrize(
    ("mode", "right", "n", "outcome"),
    [
        ("both", {"strict-match": 50, "flexible-extract": 50}, 50, "pass"),
        ("both", {"strict-match": 50, "flexible-extract": 49}, 50, None),  # one is not sure
        ("both", {"strict-match": 0, "flexible-extract": 5}, 5, "fail"),  # any one below fails
        ("fail", {"strict-match": 50, "flexible-extract": 50}, 50, None),
        ("fail", {"strict-match": 0, "flexible-extract": 0}, 5, "fail"),
        ("pass", {"strict-match": 0, "flexible-extract": 0}, 5, None),
        ("pass", {"strict-match": 98, "flexible-extract": 99}, 100, "pass"),
        ("off", {"strict-match": 0, "flexible-extract": 0}, 100, None),
        ("both", {"strict-match": 90, "flexible-extract": 90}, 100, None),
    ],
)
def test_outcome_by_mode(mode, right, n, outcome):
    test = SequentialTest(0.90, FILTERS, mode=mode)
    assert test.outcome(right, n) == outcome
    assert test.decide(right, n).outcome == outcome


@pytest.mark.parametrize("threshold", [0.0, 1.0])
def test_thresholds_of_zero_and_one_never_stop_early(threshold):
    test = SequentialTest(threshold, FILTERS)
    assert not test.active
    assert test.outcome({"strict-match": 0, "flexible-extract": 0}, 500) is None
    assert test.decide({"strict-match": 500, "flexible-extract": 500}, 500).outcome is None


def test_a_fail_needs_more_evidence_with_more_filters():
    one = SequentialTest(0.90, ("strict-match",))
    two = SequentialTest(0.90, FILTERS)
    assert one.bounds(6) == (7, 1)  # one right of six: below at alpha
    assert two.bounds(6) == (7, 0)  # not at alpha / 2
    assert one.bounds(200)[0] == two.bounds(200)[0]  # PASS needs every filter: no share


@pytest.mark.parametrize(
    ("alpha", "mode", "message"),
    [(0.0, "both", "alpha 0.0 is not strictly between 0 and 1"), (1.0, "both", "alpha 1.0")],
)
def test_bad_alpha_is_refused(alpha, mode, message):
    with pytest.raises(ValueError, match=message):
        SequentialTest(0.9, FILTERS, mode=mode, alpha=alpha)


def test_decision_reason_names_the_filters_the_numbers_and_alpha():
    test = SequentialTest(0.90, FILTERS)
    decision = test.decide({"strict-match": 50, "flexible-extract": 50}, 50)
    text = decision.reason(0.90, 1319, 0.05)
    assert text.startswith(
        "stopped early after 50 of 1319 questions: strict-match 1.0000 (e-value "
    )
    assert text.endswith("certainly above threshold 0.9000 (alpha 0.05)")
    assert all(state.e_value >= 20 for state in decision.filters)


def _answer(right: bool) -> dict[str, bool]:
    return dict.fromkeys(FILTERS, right)


def test_the_reader_waits_for_the_prefix():
    """Five wrong answers decide FAIL only once every earlier question has arrived."""
    reader = PrefixReader(SequentialTest(0.90, FILTERS))
    for position in (1, 2, 3, 4, 6):
        assert reader.arrive(position, _answer(False)) is None
    assert reader.n == 0
    decision = reader.arrive(0, _answer(False))
    assert decision is not None
    assert (decision.outcome, decision.n) == ("fail", 5)


def test_right_answers_arriving_first_do_not_pass_a_run_whose_wrong_answers_are_late():
    """Fifty questions: the 45 right ones arrive before the 5 wrong ones dispatched among them.
    Read in arrival order they would pass at once (50 of 50 right is certain above 0.90)."""
    reader = PrefixReader(SequentialTest(0.90, FILTERS))
    wrong = {3, 11, 20, 31, 44}
    for position in (p for p in range(50) if p not in wrong):
        assert reader.arrive(position, _answer(True)) is None
    for position in sorted(wrong):
        assert reader.arrive(position, _answer(False)) is None
    assert reader.n == 50
    assert reader.current().outcome is None
    assert [s.right for s in reader.current().filters] == [45, 45]


def test_a_failed_request_reads_as_wrong_for_every_filter():
    reader = PrefixReader(SequentialTest(0.90, FILTERS))
    for position in range(4):
        reader.arrive(position, None)
    decision = reader.arrive(4, None)
    assert decision is not None
    assert decision.outcome == "fail"
    assert [s.right for s in decision.filters] == [0, 0]


def test_the_first_certain_prefix_is_kept():
    reader = PrefixReader(SequentialTest(0.90, FILTERS))
    for position in range(5):
        reader.arrive(position, _answer(False))
    first = reader.decision
    assert first is not None
    assert reader.arrive(5, _answer(True)) is first
    assert reader.current() is first


def test_dispatch_order_is_a_seeded_permutation():
    order = dispatch_order(1319)
    assert sorted(order) == list(range(1319))
    assert order == dispatch_order(1319)
    assert order != list(range(1319))
    assert dispatch_order(1319, seed=7) != order


# The operating characteristics the sequential gate promises, measured by seeded simulation
# (tests/simulation.py, no HTTP); BENCHMARKS.md records the same figures.


@pytest.mark.parametrize(
    "setup",
    [
        {},  # answers drawn at the threshold
        {"population": True},  # a shuffled fixed set of 1187 right of 1319 (0.8999)
        {"concurrency": 64},  # 64 in flight, wrong answers 4x slower: they arrive late
        {"concurrency": 8, "slow": 10.0},
    ],
    ids=["independent", "population", "late-wrong-64", "late-wrong-8"],
)
def test_false_pass_at_the_threshold_is_at_most_alpha(setup):
    rates = simulate_gate(0.90, runs=RUNS, seed=14, **setup)
    assert rates.runs >= 2000
    assert rates.passed <= DEFAULT_ALPHA
    assert rates.failed <= DEFAULT_ALPHA  # at exactly the threshold a FAIL is wrong too


def test_reading_in_arrival_order_would_pass_a_model_below_the_threshold():
    """What the dispatch-order rule prevents: with wrong answers arriving late, counting answers
    as they arrive passes a 0.88 model against 0.90 most of the time."""
    arrival = simulate_gate(0.88, runs=RUNS, seed=15, concurrency=64, read="arrival")
    dispatch = simulate_gate(0.88, runs=RUNS, seed=15, concurrency=64)
    assert arrival.passed > 0.5
    assert dispatch.passed <= DEFAULT_ALPHA


@pytest.mark.parametrize(("accuracy", "runs"), [(0.97, 200), (0.85, 100), (0.0, 100), (0.9, 40)])
def test_prefix_reader_decides_as_the_dispatch_order_does_whatever_the_arrival_order(
    accuracy, runs
):
    assert prefix_reader_agrees(runs, seed=16, accuracy=accuracy) == 0


def test_questions_used_at_097_against_090():
    rates = simulate_gate(0.97, runs=RUNS, seed=17)
    assert rates.passed == 1.0
    assert rates.median_used <= 120  # of 1319
    served = simulate_gate(0.97, runs=RUNS, seed=17, concurrency=8)
    assert served.passed == 1.0
    assert served.median_asked <= 150


def test_questions_used_at_zero_accuracy():
    rates = simulate_gate(0.0, runs=RUNS, seed=18)
    assert rates.failed == 1.0
    assert max(rates.used) <= 10
    served = simulate_gate(0.0, runs=RUNS, seed=18, concurrency=8)
    assert max(served.asked) <= 40
