"""The sweep rule: Holm's adjustment over configs, one-sided tests, compare's rule per filter."""

from __future__ import annotations

import pytest

from evalgate.compare.paired import (
    Finding,
    PairedCounts,
    config_p,
    holm,
    judge_pairs,
    mcnemar_exact_p,
    one_sided_p,
)

pytestmark = pytest.mark.unit


def table(n: int, lost: int, gained: int) -> PairedCounts:
    return PairedCounts(n - lost - gained, lost, gained, 0)


@pytest.mark.parametrize(
    ("p", "adjusted"),
    [
        ([], []),
        ([0.04], [0.04]),
        ([0.01, 0.04, 0.03], [0.03, 0.06, 0.06]),  # 0.01*3, max(0.03*2, 0.03), 0.04*1 -> 0.06
        ([0.5, 0.001, 0.2, 0.9], [1.0, 0.004, 0.6, 1.0]),
        ([0.02, 0.02], [0.04, 0.04]),
    ],
)
def test_holm(p, adjusted):
    assert holm(p) == pytest.approx(adjusted)


def test_one_sided_p_is_half_the_two_sided_in_the_direction_seen_and_near_one_against_it():
    counts = table(1319, 40, 20)
    assert one_sided_p(counts, drop=True) == pytest.approx(mcnemar_exact_p(40, 20) / 2)
    assert one_sided_p(counts, drop=False) > 0.99
    assert one_sided_p(table(1319, 0, 0), drop=True) == 1.0


def test_a_config_p_is_its_smallest_filter_times_its_filters():
    a, b = table(1319, 40, 20), table(1319, 30, 25)
    assert config_p({"x": a, "y": b}, drop=True) == pytest.approx(2 * one_sided_p(a, drop=True))
    assert config_p({}, drop=True) == 1.0


def _sweep(changed: PairedCounts, others: int) -> dict[str, dict[str, PairedCounts]]:
    pairs = {f"c{i}": {"strict-match": table(1319, 20, 20)} for i in range(others)}
    pairs["changed"] = {"strict-match": changed}
    return pairs


def test_a_drop_compare_calls_a_regression_is_not_one_among_200_configs():
    drop = table(1319, 35, 17)  # -1.4 points, two-sided p = 0.018
    assert mcnemar_exact_p(35, 17) < 0.05
    alone = {c.key: c for c in judge_pairs(_sweep(drop, 0), 0.02)}
    assert alone["changed"].finding is Finding.REGRESSION
    among = {c.key: c for c in judge_pairs(_sweep(drop, 199), 0.02)}
    assert among["changed"].finding is Finding.INCONCLUSIVE
    assert among["changed"].adjusted_drop == pytest.approx(min(1.0, 200 * among["changed"].p_drop))


def test_a_clear_drop_is_a_regression_among_200_and_named_by_its_filter():
    judged = {c.key: c for c in judge_pairs(_sweep(table(1319, 70, 15), 199), 0.02)}
    changed = judged["changed"]
    assert changed.finding is Finding.REGRESSION
    assert changed.deciding.filter == "strict-match"
    assert changed.adjusted_drop < 0.05
    assert {c.finding for k, c in judged.items() if k != "changed"} == {Finding.EQUIVALENT}


def test_a_clear_gain_is_improved_and_unchanged_configs_stay_equivalent():
    judged = {c.key: c for c in judge_pairs(_sweep(table(1319, 15, 70), 49), 0.02)}
    assert judged["changed"].finding is Finding.IMPROVED
    assert judged["c0"].finding is Finding.EQUIVALENT


def test_the_worst_filter_decides_a_config():
    pairs = {"k": {"strict-match": table(1319, 80, 10), "flexible-extract": table(1319, 20, 20)}}
    (config,) = judge_pairs(pairs, 0.02)
    assert config.finding is Finding.REGRESSION
    assert config.deciding.filter == "strict-match"
    assert [f.finding for f in config.filters] == [Finding.REGRESSION, Finding.EQUIVALENT]
