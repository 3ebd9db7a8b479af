"""The operating characteristics the two rules promise, measured by seeded simulation (no HTTP).

BENCHMARKS.md records the same figures (benchmarks/suite.py --only simulation); docs/compare.md
and the sequential module's docstring state them. The fitted floors' simulation is
benchmarks/floors_sim.py (BENCHMARKS.md's floors section, docs/history.md).
"""

from __future__ import annotations

import collections
import math
import random
import statistics

import pytest

from benchmarks import floors_sim
from evalgate.gate.sequential import DEFAULT_ALPHA
from tests.conftest import ROOT
from tests.simulation import (
    RUNS,
    compare_rates,
    compare_table,
    prefix_reader_agrees,
    repeat_rates,
    repeat_table,
    simulate_compare,
    simulate_compare_repeats,
    simulate_gate,
    simulate_sweep,
    sweep_rates,
    sweep_table,
)

pytestmark = pytest.mark.unit


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


def test_compare_no_change_is_equivalent_and_rarely_a_regression():
    rates = simulate_compare(0.0, runs=RUNS, seed=19)
    assert rates.equivalent >= 0.80
    assert rates.regression <= 0.05


def test_compare_finds_a_true_two_point_drop():
    rates = simulate_compare(0.02, runs=RUNS, seed=20)
    assert rates.regression >= 0.80


def test_the_compare_table_in_the_docs_is_what_the_simulation_gives():
    text = (ROOT / "docs" / "compare.md").read_text(encoding="utf-8")
    shown = text.split("<!-- compare-rates:start -->\n", 1)[1].split("<!-- compare-rates:end -->")[
        0
    ]
    assert shown == compare_table(compare_rates())


def test_compare_clusters_repeated_questions_where_counting_answers_would_cry_regression():
    """GPQA-shaped runs (198 questions, each asked twice), no true change, 20% of the questions
    flipping and always in both repeats: the clustered rule keeps false REGRESSIONs within 5%,
    the naive one (every answer independent) does not."""
    rates = simulate_compare_repeats(1.0, runs=RUNS, seed=21)
    clustered, naive = rates.clustered.regression, rates.naive.regression
    print(f"false REGRESSION: clustered {clustered:.1%}, naive {naive:.1%}")
    assert clustered <= 0.05
    assert naive > 0.05
    assert naive > 2 * clustered


def test_compare_clustering_independent_repeats_costs_next_to_nothing():
    """A flip that hits one repeat only: the clustered test is the naive one exactly, and the
    interval widens only by the small-sample correction of the cluster count."""
    rates = simulate_compare_repeats(0.0, runs=500, seed=22)
    assert rates.clustered.regression == rates.naive.regression
    assert abs(rates.clustered.equivalent - rates.naive.equivalent) <= 0.01


def test_the_repeats_table_in_the_docs_is_what_the_simulation_gives():
    text = (ROOT / "docs" / "compare.md").read_text(encoding="utf-8")
    shown = text.split("<!-- repeat-rates:start -->\n", 1)[1].split("<!-- repeat-rates:end -->")[0]
    assert shown == repeat_table(repeat_rates())


def test_a_sweep_of_200_unchanged_configs_rarely_fails():
    """Holm over 200 configs: a sweep with no true change reports any REGRESSION at most 5% of
    the time (2,000 seeded sweeps, 3% of answers flipping)."""
    assert simulate_sweep(0.0, runs=RUNS, seed=1700).any_regression <= 0.05


@pytest.mark.parametrize(("drop", "seed", "power"), [(0.03, 1701, 0.75), (0.04, 1702, 0.95)])
def test_a_sweep_finds_one_dropped_config_among_200(drop, seed, power):
    rates = simulate_sweep(drop, runs=RUNS, seed=seed)
    assert rates.found >= power
    assert rates.false <= 0.05


def test_the_sweep_table_in_the_docs_is_what_the_simulation_gives():
    text = (ROOT / "docs" / "verify.md").read_text(encoding="utf-8")
    shown = text.split("<!-- sweep-rates:start -->\n", 1)[1].split("<!-- sweep-rates:end -->")[0]
    assert shown == sweep_table(sweep_rates())


# -- fitted floors (benchmarks/floors_sim.py) ----------------------------------------------------


@pytest.fixture(scope="module")
def floors():
    """The full seeded simulation BENCHMARKS.md shows (about 10 s)."""
    return floors_sim.simulate()


def test_the_floors_section_of_benchmarks_is_what_the_simulation_gives(floors):
    text = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    shown = text.split("<!-- floors:start -->\n", 1)[1].split("<!-- floors:end -->")[0]
    assert shown == floors_sim.section(floors)


def test_the_beta_binomial_floor_meets_its_goals_in_every_band(floors):
    """At most 1% of unchanged runs failed per config and night, and 3- and 5-point drops
    caught at least as often as by ix wherever ix fails at most 1% of unchanged runs."""
    assert floors_sim.shortfalls(floors) == {band: [] for band in floors_sim.BANDS}
    ours = [r for r in floors if r.policy == "beta-binomial"]
    assert all(r.thin == 0 and r.caught[-1] >= 0.85 for r in ours)


def test_ix_fails_unchanged_configs_near_its_090_floor(floors):
    ix = {r.band: r for r in floors if r.policy == "ix"}
    assert ix[0.85, 0.87].unchanged > 0.95
    assert ix[0.89, 0.91].unchanged > 0.30
    assert ix[0.95, 0.97].caught[1] < 0.5  # and misses most 3-point drops where it is loose


def test_the_floors_simulation_draws_binomial_and_overdispersed_runs():
    """What the simulation's proof rests on: its binomial sampler is the binomial, and a run's
    score varies by binomial noise times 1 + 1318 rho."""
    rng = random.Random(4905)  # noqa: S311 -- the simulation's own seeded generator
    n, p, draws = 30, 0.8, 20000
    counts = collections.Counter(floors_sim.binomial(rng, n, p) for _ in range(draws))
    distance = sum(
        abs(counts[x] / draws - math.comb(n, x) * p**x * (1 - p) ** (n - x)) for x in range(n + 1)
    )
    assert distance < 0.03  # total variation, twice; 20,000 draws
    rho, accuracy = 1e-3, 0.9
    scores = [floors_sim.run(rng, accuracy, rho) / floors_sim.QUESTIONS for _ in range(draws)]
    binomial = accuracy * (1 - accuracy) / floors_sim.QUESTIONS
    assert statistics.fmean(scores) == pytest.approx(accuracy, abs=0.0005)
    assert statistics.variance(scores) / binomial == pytest.approx(1 + 1318 * rho, rel=0.05)
