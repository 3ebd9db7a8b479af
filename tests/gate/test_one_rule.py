"""One gate rule: `evalgate run` and `evalgate verify` on its result.json reach the same verdict
and exit code, and the recorded result says what the run's exit code says.

Each case is a real run against the loopback engine (tests/fakeengine.py), then verify over its
folder, both through the CLI.
"""

from __future__ import annotations

import pytest

from tests.conftest import load_result, run_args
from tests.fakeengine import EngineBehaviour, FakeEngine, Fault, load_gsm8k

pytestmark = pytest.mark.loopback

QUESTIONS = list(load_gsm8k())


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


def test_too_many_truncated_answers_fail_run_and_verify_alike(cli, tmp_path):
    out = tmp_path / "run"
    with FakeEngine(EngineBehaviour()) as engine:
        engine.inject(Fault("length", questions={q for q in QUESTIONS[:10]}))
        ran = cli(*run_args(engine.url, out, limit=50, max_truncated_rate=0.05, num_concurrent=16))
    verified = cli("verify", str(out), "--no-github")

    result = load_result(out)
    assert ran.code == result["exit_code"] == verified.code == 1, ran.text + verified.text
    assert "over --max-truncated-rate 5.0%" in result["verdict"]["problems"][0]
    assert "over --max-truncated-rate 5.0%" in verified.out


def test_a_regression_against_the_baseline_is_recorded_and_fails_verify(cli, tmp_path):
    """The defect: `run --baseline` with a regression exited 1 while result.json said pass and
    exit 0, and `evalgate verify` then passed the regressed run."""
    baseline, candidate = tmp_path / "baseline", tmp_path / "candidate"
    with FakeEngine(EngineBehaviour()) as engine:
        assert cli(*run_args(engine.url, baseline, limit=300, num_concurrent=16)).code == 0
    # 0.96 at n = 300 clears 0.90 beyond doubt (95% CI 0.931-0.977): the gate alone passes;
    # but 12 of the baseline's right answers are now wrong, none gained.
    with FakeEngine(EngineBehaviour(accuracy=0.96)) as engine:
        ran = cli(*run_args(engine.url, candidate, limit=300, baseline=baseline, num_concurrent=16))
    verified = cli("verify", str(candidate), "--no-github")

    result = load_result(candidate)
    assert ran.code == 1, ran.text
    assert "REGRESSION" in ran.out
    assert (result["status"], result["exit_code"]) == ("fail", 1)
    assert [c["outcome"] for c in result["checks"]] == ["pass", "pass"]
    assert result["verdict"]["problems"][0].startswith(
        f"regression against the baseline {baseline}"
    )
    assert result["files"]["comparison"] == "comparison.json"
    assert verified.code == 1, verified.text
    assert "regression against the baseline" in verified.out


def test_a_missing_baseline_fails_before_anything_is_sent(cli, tmp_path):
    with FakeEngine(EngineBehaviour()) as engine:
        ran = cli(
            *run_args(
                engine.url, tmp_path / "run", baseline=tmp_path / "nowhere", num_concurrent=16
            )
        )
        sent = len(engine.requests)

    assert ran.code == 2
    assert "is neither a run folder holding result.json nor a result file" in ran.err
    assert sent == 0
