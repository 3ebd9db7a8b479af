"""gate.verdict: both exact_match filters must clear the floor; nothing is a pass by default."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalgate.gate.verdict import Score, decide


def score(value, filter_="strict-match", metric="exact_match"):
    return Score(task="gsm8k", metric=metric, filter=filter_, value=value, stderr=0.01, n=1319)


def both(strict, flexible):
    return [score(strict, "strict-match"), score(flexible, "flexible-extract")]


VERDICTS = [
    # (case, scores, threshold, passed, reason)
    (
        "both clear",
        both(0.95, 0.93),
        0.91,
        True,
        "strict-match 0.9500, flexible-extract 0.9300 >= threshold 0.9100",
    ),
    (
        "exactly at the threshold clears",
        both(0.91, 0.91),
        0.91,
        True,
        "strict-match 0.9100, flexible-extract 0.9100 >= threshold 0.9100",
    ),
    (
        "strict below",
        both(0.85, 0.93),
        0.91,
        False,
        "exact_match,strict-match = 0.8500 below threshold 0.9100 (worst: strict-match)",
    ),
    (
        "flexible below",
        both(0.95, 0.90),
        0.91,
        False,
        "exact_match,flexible-extract = 0.9000 below threshold 0.9100 (worst: flexible-extract)",
    ),
    (
        "both below: both listed, the worst named",
        both(0.40, 0.80),
        0.91,
        False,
        "exact_match,strict-match = 0.4000, exact_match,flexible-extract = 0.8000 below "
        "threshold 0.9100 (worst: strict-match)",
    ),
    (
        "the incident: every request rejected, both zero",
        both(0.0, 0.0),
        0.90,
        False,
        "exact_match,strict-match = 0.0000, exact_match,flexible-extract = 0.0000 below "
        "threshold 0.9000",
    ),
    (
        "no scores at all",
        [],
        0.90,
        False,
        "no exact_match score was produced: nothing to gate",
    ),
    (
        "only other metrics",
        [score(1.0, metric="exact_match_stderr"), score(1.0, metric="bleu")],
        0.90,
        False,
        "no exact_match score was produced: nothing to gate",
    ),
    (
        "other metrics are ignored, even failing ones",
        [*both(0.95, 0.93), score(0.0, metric="f1")],
        0.91,
        True,
        "strict-match 0.9500, flexible-extract 0.9300 >= threshold 0.9100",
    ),
    (
        "a NaN score never passes",
        both(math.nan, 0.95),
        0.90,
        False,
        "exact_match,strict-match = nan below threshold 0.9000",
    ),
]


@pytest.mark.parametrize(
    ("scores", "threshold", "passed", "reason"),
    [case[1:] for case in VERDICTS],
    ids=[case[0] for case in VERDICTS],
)
def test_decide(scores, threshold, passed, reason):
    verdict = decide(scores, threshold)

    assert verdict.passed is passed
    assert reason in verdict.reason


def test_checks_list_each_gated_score():
    verdict = decide([*both(0.95, 0.85), score(0.1, metric="f1")], 0.9)

    assert [(c.metric, c.filter, c.value, c.threshold, c.passed) for c in verdict.checks] == [
        ("exact_match", "strict-match", 0.95, 0.9, True),
        ("exact_match", "flexible-extract", 0.85, 0.9, False),
    ]


# -- properties -----------------------------------------------------------------------------

values = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
thresholds = st.floats(min_value=0.01, max_value=1.0, allow_nan=False)
metrics = st.sampled_from(["exact_match", "exact_match_stderr", "f1"])
filters = st.sampled_from(["strict-match", "flexible-extract", "none"])
scores = st.lists(st.builds(score, values, filters, metrics), max_size=6)


@given(scores, thresholds)
def test_never_passed_below_the_threshold_or_without_scores(scored, threshold):
    gated = [s.value for s in scored if s.metric == "exact_match"]

    verdict = decide(scored, threshold)

    if not gated or any(value < threshold for value in gated):
        assert not verdict.passed
    else:
        assert verdict.passed
    assert len(verdict.checks) == len(gated)


@given(st.lists(values, min_size=1, max_size=4), thresholds, st.lists(values, max_size=3))
def test_always_passed_when_every_exact_match_clears(offsets, threshold, others):
    scored = [score(threshold + (1 - threshold) * o, f"filter-{i}") for i, o in enumerate(offsets)]
    scored += [score(v, metric="f1") for v in others]

    verdict = decide(scored, threshold)

    assert verdict.passed
    assert verdict.reason.endswith(f">= threshold {threshold:.4f}")


@given(st.lists(values, min_size=1, max_size=4), thresholds)
def test_one_score_below_is_enough_to_fail(others, threshold):
    below = score(math.nextafter(threshold, 0.0), "strict-match")
    scored = [below, *(score(max(v, threshold), "flexible-extract") for v in others)]

    verdict = decide(scored, threshold)

    assert not verdict.passed
    assert "exact_match,strict-match" in verdict.reason
    assert f"below threshold {threshold:.4f}" in verdict.reason
