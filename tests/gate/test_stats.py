"""stats.py: standard errors, Wilson intervals and the rule that turns them into a decision."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalgate.gate.stats import GSM8K_TEST_SIZE, judge, standard_error, wilson_interval


@pytest.mark.parametrize(
    ("p", "n", "low", "high"),
    [
        (0.5, 100, 0.4038, 0.5962),
        (0.92, 50, 0.8116, 0.9685),
        (0.95, 1319, 0.9369, 0.9605),
        (0.0, 10, 0.0, 0.2775),
        (1.0, 10, 0.7225, 1.0),
        (0.7, 0, 0.0, 1.0),
    ],
)
def test_wilson_interval(p, n, low, high):
    got = wilson_interval(p, n)
    assert got == pytest.approx((low, high), abs=5e-5)


@pytest.mark.parametrize(
    ("p", "n", "reported", "expected"),
    [
        (0.95, 1319, 0.006, 0.006),  # lm-eval's own figure wins
        (0.95, 1319, None, math.sqrt(0.95 * 0.05 / 1318)),
        (0.5, 2, None, 0.5),
        (0.5, 1, None, None),  # lm-eval reports "N/A" here too
        (0.5, 0, None, None),
        (0.5, 100, float("nan"), math.sqrt(0.25 / 99)),
    ],
)
def test_standard_error(p, n, reported, expected):
    got = standard_error(p, n, reported)
    assert got == (None if expected is None else pytest.approx(expected))


@pytest.mark.parametrize(
    ("value", "n", "threshold", "min_samples", "expected"),
    [
        # the case: a --limit 50 run at 0.92 against 0.90 tells nothing either way
        (0.92, 50, 0.90, GSM8K_TEST_SIZE, ("inconclusive", "straddles")),
        # a full run well clear of its threshold
        (0.95, 1319, 0.90, GSM8K_TEST_SIZE, ("pass", "above")),
        # a full run close to its threshold: the point estimate decides
        (0.91, 1319, 0.91, GSM8K_TEST_SIZE, ("pass", "point estimate at or above")),
        (0.905, 1319, 0.91, GSM8K_TEST_SIZE, ("fail", "point estimate below")),
        # far below: fail whatever the sample size
        (0.80, 1319, 0.90, GSM8K_TEST_SIZE, ("fail", "below the threshold")),
        (0.60, 50, 0.90, GSM8K_TEST_SIZE, ("fail", "below the threshold")),
        # a small run can still pass beyond doubt
        (0.99, 500, 0.90, GSM8K_TEST_SIZE, ("pass", "above")),
        # --min-samples 0: the harness's rule, point estimate only
        (0.92, 50, 0.90, 0, ("pass", "point estimate")),
        (0.88, 50, 0.90, 0, ("fail", "point estimate below")),
        # a lower --min-samples lets a 500-question run decide
        (0.92, 500, 0.91, 500, ("pass", "point estimate")),
        (0.92, 499, 0.91, 500, ("inconclusive", "n = 499 < 500")),
        # nothing scored is never a pass
        (1.0, 0, 0.90, 0, ("fail", "n = 0")),
    ],
)
def test_judge(value, n, threshold, min_samples, expected):
    outcome, why = expected
    judgement = judge(value, n, threshold, min_samples)
    assert judgement.outcome == outcome
    assert why in judgement.why


def test_judge_keeps_the_reported_stderr_and_the_interval():
    judgement = judge(0.92, 50, 0.90, reported_stderr=0.0388)
    assert judgement.stderr == 0.0388
    assert (judgement.low, judgement.high) == pytest.approx(wilson_interval(0.92, 50))


@settings(deadline=None)  # timing varies on a shared CI machine; the property does not
@given(
    value=st.floats(0, 1),
    n=st.integers(0, 5000),
    threshold=st.floats(0.01, 1),
    min_samples=st.integers(0, 5000),
)
def test_judge_never_passes_a_score_whose_interval_is_below(value, n, threshold, min_samples):
    judgement = judge(value, n, threshold, min_samples)
    assert judgement.low <= value <= judgement.high or n == 0
    if judgement.high < threshold or n == 0:
        assert judgement.outcome == "fail"
    if judgement.outcome == "pass":
        assert judgement.low >= threshold or (n >= min_samples and value >= threshold)
    if judgement.outcome == "inconclusive":
        assert n < min_samples
        assert judgement.low < threshold <= judgement.high
