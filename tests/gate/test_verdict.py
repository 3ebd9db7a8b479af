"""rules.stats: standard errors and Wilson intervals (the rule that uses them: test_verdict.py)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalgate.errors import ExitCode
from evalgate.evidence.model import Score
from evalgate.gate.verdict import decide, judge, standard_error, wilson_interval
from evalgate.tasks.dataset import GSM8K_TEST_SIZE
from tests.conftest import load_result, run_args, run_subprocess, thresholds_json
from tests.fakeengine import EngineBehaviour, FakeEngine


@pytest.mark.unit
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


@pytest.mark.unit
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


# rules.verdict: the one gate rule for run, hook and verify; nothing is a pass by default.
#
# The oracles here are the rule's definition in words (the module docstring), checked against
# numbers worked out independently (the Wilson bounds of test_stats.py), never a copy of the code.

FULL = GSM8K_TEST_SIZE


def score(value, filter_="strict-match", metric="exact_match", n=FULL, task="gsm8k"):
    return Score(task=task, metric=metric, filter=filter_, value=value, stderr=0.01, n=n)


def both(strict, flexible, n=FULL):
    return [score(strict, "strict-match", n=n), score(flexible, "flexible-extract", n=n)]


# (value, n, threshold, min_samples, outcome); the Wilson bounds quoted are test_stats.py's.
JUDGEMENTS = [
    # a --limit 50 run at 0.92 against 0.90: interval 0.8116-0.9685 straddles, n < 1319
    (0.92, 50, 0.90, FULL, "inconclusive"),
    # a full run well clear of its threshold: interval 0.9369-0.9605 above 0.90
    (0.95, FULL, 0.90, FULL, "pass"),
    # a full run close to its threshold: the point estimate decides
    (0.91, FULL, 0.91, FULL, "pass"),
    (0.905, FULL, 0.91, FULL, "fail"),
    # far below: fail whatever the sample size
    (0.80, FULL, 0.90, FULL, "fail"),
    (0.60, 50, 0.90, FULL, "fail"),
    # a small run can still pass beyond doubt
    (0.99, 500, 0.90, FULL, "pass"),
    # --min-samples 0: the harness's rule, point estimate only
    (0.92, 50, 0.90, 0, "pass"),
    (0.88, 50, 0.90, 0, "fail"),
    # a lower --min-samples lets a 500-question run decide
    (0.92, 500, 0.91, 500, "pass"),
    (0.92, 499, 0.91, 500, "inconclusive"),
    # nothing scored, or not a number, is never a pass
    (1.0, 0, 0.90, 0, "fail"),
    (math.nan, FULL, 0.90, 0, "fail"),
]


@pytest.mark.unit
@pytest.mark.parametrize(("value", "n", "threshold", "min_samples", "outcome"), JUDGEMENTS)
def test_judge(value, n, threshold, min_samples, outcome):
    check = judge(score(value, n=n), threshold, min_samples)
    assert check.outcome == outcome
    assert check.passed is (outcome == "pass")
    assert (check.n, check.threshold) == (n, threshold)


@pytest.mark.unit
def test_judge_records_the_interval():
    check = judge(score(0.92, n=50), 0.90, FULL)
    assert (check.low, check.high) == pytest.approx((0.8116, 0.9685), abs=5e-5)


VERDICTS = [
    # (case, scores, threshold, min_samples, outcome, key sentences of the reason)
    (
        "both clear",
        both(0.95, 0.93),
        0.91,
        FULL,
        "pass",
        ["strict-match 0.9500 (95% CI", "flexible-extract 0.9300", ">= threshold 0.9100"],
    ),
    (
        "exactly at the threshold, full set: the point estimate clears",
        both(0.91, 0.91),
        0.91,
        FULL,
        "pass",
        [">= threshold 0.9100"],
    ),
    (
        "strict below",
        both(0.85, 0.93),
        0.91,
        FULL,
        "fail",
        ["strict-match 0.8500 (95% CI 0.8297-0.8683, n=1319) below threshold 0.9100"],
    ),
    (
        "flexible below",
        both(0.95, 0.90),
        0.91,
        FULL,
        "fail",
        ["flexible-extract 0.9000", "below threshold 0.9100"],
    ),
    (
        "the incident: every request rejected, both zero",
        both(0.0, 0.0),
        0.90,
        FULL,
        "fail",
        ["strict-match 0.0000", "flexible-extract 0.0000", "below threshold 0.9000"],
    ),
    (
        "no scores at all",
        [],
        0.90,
        FULL,
        "fail",
        ["no exact_match score was produced: nothing to gate"],
    ),
    (
        "only other metrics",
        [score(1.0, metric="exact_match_stderr"), score(1.0, metric="bleu")],
        0.90,
        FULL,
        "fail",
        ["no exact_match score was produced: nothing to gate"],
    ),
    (
        "other metrics are ignored, even failing ones",
        [*both(0.95, 0.93), score(0.0, metric="f1")],
        0.91,
        FULL,
        "pass",
        [">= threshold 0.9100"],
    ),
    (
        "a NaN score never passes",
        both(math.nan, 0.95),
        0.90,
        FULL,
        "fail",
        ["strict-match nan", "below threshold 0.9000"],
    ),
    (
        "GSM8K with only one of its two filters fails",
        [score(0.97, "strict-match")],
        0.90,
        FULL,
        "fail",
        ["no exact_match,flexible-extract score: the gsm8k gate needs every one of"],
    ),
    (
        "GPQA-diamond is gated on its one filter",
        [score(0.6, "extract_abcd", n=396, task="gpqa_diamond_cot_n_shot")],
        0.30,
        396,
        "pass",
        ["extract_abcd 0.6000 (95% CI", ">= threshold 0.3000"],
    ),
    (
        "GPQA-diamond without its extract_abcd score fails",
        [score(0.6, "strict-match", n=396, task="gpqa_diamond_cot_n_shot")],
        0.30,
        396,
        "fail",
        ["no exact_match,extract_abcd score: the gpqa gate needs every one of extract_abcd"],
    ),
    (
        "a --limit 200 run at 0.88 against 0.90 cannot tell",
        both(0.88, 0.88, n=200),
        0.90,
        FULL,
        "inconclusive",
        ["straddles the threshold and n < 1319", "--min-samples 0"],
    ),
    (
        "the same run decided on the point estimate",
        both(0.88, 0.88, n=200),
        0.90,
        0,
        "fail",
        ["below threshold 0.9000"],
    ),
]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("scores", "threshold", "min_samples", "outcome", "sentences"),
    [case[1:] for case in VERDICTS],
    ids=[case[0] for case in VERDICTS],
)
def test_decide(scores, threshold, min_samples, outcome, sentences):
    verdict = decide(scores, threshold, min_samples=min_samples)

    assert verdict.outcome == outcome
    for sentence in sentences:
        assert sentence in verdict.reason
    assert verdict.exit_code == {"pass": 0, "fail": 1, "inconclusive": 5}[outcome]


@pytest.mark.unit
def test_checks_list_each_gated_score():
    verdict = decide([*both(0.95, 0.85), score(0.1, metric="f1")], 0.9, min_samples=FULL)

    assert [(c.metric, c.filter, c.value, c.threshold, c.passed) for c in verdict.checks] == [
        ("exact_match", "strict-match", 0.95, 0.9, True),
        ("exact_match", "flexible-extract", 0.85, 0.9, False),
    ]


@pytest.mark.unit
def test_a_run_level_problem_fails_passing_scores_and_is_recorded():
    problem = "12.0% of answers were truncated or empty, over --max-truncated-rate 5.0%"
    verdict = decide(both(0.97, 0.97), 0.9, min_samples=FULL, problems=[problem])

    assert verdict.outcome == "fail"
    assert problem in verdict.reason
    assert verdict.record().problems == [problem]
    assert verdict.exit_code == ExitCode.FAIL


@pytest.mark.unit
def test_a_doubt_makes_passing_scores_inconclusive_but_never_hides_a_failure():
    doubt = "the comparison with the baseline is inconclusive"
    passing = decide(both(0.97, 0.97), 0.9, min_samples=FULL, doubts=[doubt])
    failing = decide(both(0.5, 0.5), 0.9, min_samples=FULL, doubts=[doubt])

    assert (passing.outcome, failing.outcome) == ("inconclusive", "fail")
    assert doubt in passing.reason
    assert passing.record().doubts == [doubt]


@pytest.mark.unit
def test_the_matched_threshold_key_is_named():
    verdict = decide(both(0.5, 0.5), 0.91, min_samples=FULL, matched="models.dsr1")
    assert "below threshold 0.9100 (models.dsr1)" in verdict.reason


@pytest.mark.unit
@pytest.mark.parametrize(
    ("scores", "given", "outcome"),
    [
        ([], {}, "fail"),
        (both(0.97, 0.97), {"problems": ["regression against the baseline b: ..."]}, "fail"),
        (
            both(0.97, 0.97),
            {"doubts": ["the comparison with the baseline is inconclusive"]},
            "inconclusive",
        ),
        (both(0.97, 0.97), {}, "pass"),
        (both(0.5, 0.5), {}, "fail"),
    ],
    ids=["no scores", "a problem alone", "a doubt alone", "pass", "below"],
)
def test_every_reason_names_the_floor_and_its_entry(scores, given, outcome):
    """A run's last line is its reason: failed on a problem, or held back by a doubt, it named
    neither the floor nor the entry that gave it."""
    verdict = decide(scores, 0.91, min_samples=FULL, matched="model:dsr1", **given)

    assert verdict.outcome == outcome
    assert verdict.reason.count("threshold 0.9100 (model:dsr1)") == 1, verdict.reason
    for said in [*given.get("problems", ()), *given.get("doubts", ())]:
        assert verdict.reason.startswith(said)  # what decided comes first


values = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


thresholds = st.floats(min_value=0.01, max_value=1.0, allow_nan=False)


sizes = st.integers(min_value=0, max_value=3000)


@pytest.mark.unit
@settings(deadline=None)  # timing varies on a shared CI machine; the properties do not
@given(values, values, sizes, thresholds, st.integers(min_value=0, max_value=3000))
def test_a_pass_never_has_a_score_below_the_threshold(strict, flexible, n, threshold, needed):
    verdict = decide(both(strict, flexible, n), threshold, min_samples=needed)

    if verdict.outcome == "pass":
        assert strict >= threshold and flexible >= threshold and n > 0


@pytest.mark.unit
@settings(deadline=None)
@given(values, values, st.integers(min_value=1, max_value=3000), thresholds)
def test_with_min_samples_0_the_point_estimates_decide(strict, flexible, n, threshold):
    """The benchmark harness's rule, stated on its own: every exact_match >= the threshold."""
    verdict = decide(both(strict, flexible, n), threshold, min_samples=0)

    assert verdict.outcome == ("pass" if min(strict, flexible) >= threshold else "fail")


@pytest.mark.unit
@settings(deadline=None)
@given(values, sizes, thresholds, st.integers(min_value=0, max_value=3000))
def test_inconclusive_only_below_min_samples_and_only_when_the_interval_straddles(
    value, n, threshold, needed
):
    check = judge(score(value, n=n), threshold, needed)

    if check.outcome == "inconclusive":
        assert n < needed
        assert check.low < threshold <= check.high
    if n > 0 and check.low is not None and check.low >= threshold:
        assert check.outcome == "pass"


@pytest.mark.unit
@settings(deadline=None)
@given(values, sizes, thresholds)
def test_more_questions_at_the_same_score_never_turn_a_pass_into_a_fail(value, n, threshold):
    small = judge(score(value, n=n), threshold, FULL)
    large = judge(score(value, n=n * 4), threshold, FULL)

    if small.outcome == "pass":
        assert large.outcome == "pass"


def _stopped(n, right, alpha=0.2, stopped=True):
    from evalgate.evidence.model import EarlyStopRecord

    return EarlyStopRecord(
        mode="both",
        alpha=alpha,
        prior_weight=10.0,
        order_seed=1234,
        stopped=stopped,
        decision="pass" if stopped else None,
        questions=1319,
        questions_used=n,
        questions_asked=n,
        filters=[],
    )


@pytest.mark.unit
@pytest.mark.parametrize(
    ("value", "n", "threshold", "early", "outcome"),
    [
        # 35 of 35 against 0.91: the interval starts at 0.901, but at alpha 0.2 the run's
        # sequential test is certain (E = 6.5 >= 5)
        (1.0, 35, 0.91, _stopped(35, 35), "pass"),
        (1.0, 35, 0.91, None, "inconclusive"),
        (1.0, 35, 0.91, _stopped(35, 35, stopped=False), "inconclusive"),  # it never stopped
        (1.0, 35, 0.97, _stopped(35, 35), "inconclusive"),  # not certain at a stricter one
        (0.0, 5, 0.90, _stopped(5, 0, alpha=0.05), "fail"),
        # 30 of 35 against 0.97 is below beyond doubt by either rule
        (30 / 35, 35, 0.97, _stopped(35, 30), "fail"),
    ],
)
def test_a_stopped_run_is_decided_by_its_sequential_test(value, n, threshold, early, outcome):
    verdict = decide(both(value, value, n=n), threshold, min_samples=FULL, early_stop=early)
    assert [c.outcome for c in verdict.checks] == [outcome, outcome]
    assert verdict.outcome == outcome
    said = "stopped early after" in verdict.reason
    assert said == (early is not None and early.stopped and outcome != "inconclusive")


CASES = [
    # (case, engine, run flags, outcome, exit code)
    ("a full-proof pass at n = 50", EngineBehaviour(), ["--limit", "50"], "pass", 0),
    (
        "--limit 200 at 0.88 against 0.90: the interval straddles, n < 1319",
        EngineBehaviour(accuracy=0.88),
        ["--limit", "200"],
        "inconclusive",
        5,
    ),
    (
        "the same run decided on its point estimate (--min-samples 0)",
        EngineBehaviour(accuracy=0.88),
        ["--limit", "200", "--min-samples", "0"],
        "fail",
        1,
    ),
    ("far below at n = 40", EngineBehaviour(accuracy=0.5), ["--limit", "40"], "fail", 1),
]


@pytest.mark.loopback
@pytest.mark.parametrize("case", CASES, ids=[case[0] for case in CASES])
def test_run_and_verify_reach_the_same_verdict(cli, tmp_path, case):
    _, behaviour, flags, outcome, code = case
    out = tmp_path / "run"
    with FakeEngine(behaviour) as engine:
        ran = cli(*run_args(engine.url, out, *flags, num_concurrent=16))
    verified = cli("verify", str(out), "--no-github")

    result = load_result(out)
    assert (ran.code, result["status"], result["exit_code"]) == (code, outcome, code), ran.text
    assert result["verdict"]["outcome"] == outcome
    assert verified.code == code, verified.text
    assert f"1 {outcome}" in verified.out


# The advice fits the mistake: the last line names the floor that decided and its entry.


@pytest.mark.loopback
@pytest.mark.parametrize(
    ("data", "matched"),
    [
        ({"default": {"gsm8k": 0.5}}, "default"),
        ({"default": {"gsm8k": 0.5}, "models": {"fake-model": {"gsm8k": 0.6}}}, "model:fake-model"),
        (
            {
                "default": {"gsm8k": 0.5},
                "models": {"fake-model": {"gsm8k": 0.6}},
                "overrides": [{"match": {"hardware": "b200"}, "thresholds": {"gsm8k": 0.7}}],
            },
            "override[0]:hardware=b200",
        ),
    ],
    ids=["the default", "the model's entry", "an override"],
)
def test_the_last_line_names_the_floor_and_its_entry(tmp_path, data, matched):
    path = thresholds_json(tmp_path, data)
    with FakeEngine() as engine:
        done = run_subprocess(
            *run_args(engine.url, tmp_path / "run", limit=10, min_samples=0),
            "--thresholds", str(path), "--hardware", "b200",
        )  # fmt: skip

    result = load_result(tmp_path / "run")
    assert done.returncode == 0, done.stderr
    assert result["threshold"]["matched"] == matched
    floor = result["threshold"]["value"]
    assert done.stdout.splitlines()[-1].endswith(f">= threshold {floor:.4f} ({matched})")
