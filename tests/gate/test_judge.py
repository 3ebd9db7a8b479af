"""The gate stage's run-level problems and baseline comparison (gate/judge.py): `evalgate run`
and `evalgate verify` on its result.json reach the same verdict and exit code.

Each case is a real run against the loopback engine (tests/fakeengine.py), then verify over its
folder, both through the CLI.
"""

from __future__ import annotations

import pytest

from tests.conftest import load_result, run_args
from tests.fakeengine import EngineBehaviour, FakeEngine, Fault, load_gsm8k

pytestmark = pytest.mark.loopback


QUESTIONS = list(load_gsm8k())


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
