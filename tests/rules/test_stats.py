"""rules.stats: standard errors and Wilson intervals (the rule that uses them: test_verdict.py)."""

from __future__ import annotations

import math

import pytest

from evalgate.gate.verdict import standard_error, wilson_interval

pytestmark = pytest.mark.unit


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
