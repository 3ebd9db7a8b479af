"""The gate stage's run-level problems and baseline comparison (gate/judge.py): `evalgate run`
and `evalgate verify` on its result.json reach the same verdict and exit code.

Each case is a real run against the loopback engine (tests/fakeengine.py), then verify over its
folder, both through the CLI.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import (
    DOCS,
    FAULT_LIMIT,
    gate,
    load_result,
    run_args,
    run_subprocess,
)
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


# The advice fits the mistake: a run compared with the run just before it.


def test_run_baseline_just_after_a_run_warns_of_no_status_and_records_the_final_one(tmp_path):
    """The run compared itself before its verdict, while its own result said "running": "the
    candidate run ended with status running: its samples may be incomplete"."""
    first, second = tmp_path / "kv" / "auto", tmp_path / "kv" / "fp8"
    flags = ("--limit", "20", "--min-samples", "0")
    with FakeEngine() as engine:
        before = run_subprocess(*run_args(engine.url, first, *flags))
        done = run_subprocess(*run_args(engine.url, second, *flags, baseline=first))

    assert before.returncode == 0, before.stderr
    result = load_result(second)
    assert done.returncode == result["exit_code"] == 5, done.stderr  # 20 questions: too few
    assert "ended with status" not in done.stdout + done.stderr
    comparison = json.loads((second / "comparison.json").read_text())
    assert comparison["candidate"]["status"] == result["status"] == "inconclusive"
    assert comparison["warnings"] == []
    last = [line for line in done.stdout.splitlines() if line.startswith("INCONCLUSIVE: ")]
    assert last == [f"INCONCLUSIVE: {result['reason']}"]
    assert last[0].startswith("INCONCLUSIVE: the comparison with the baseline is inconclusive: ")
    assert last[0].endswith(">= threshold 0.9000 (default)")  # the floor, on this line too
    said = [set(filter(None, text.splitlines())) for text in (done.stdout, done.stderr)]
    assert not said[0] & said[1]  # no line on both streams


# Too many truncated answers fail the gate even when the scores pass.


def test_too_many_truncated_answers_fail_the_gate_even_when_the_scores_pass(tmp_path):
    question = DOCS[3].question
    with FakeEngine(EngineBehaviour(accuracy=1.0)) as perfect:
        perfect.inject(Fault("length", questions={question}))

        run = gate(perfect, tmp_path / "run", max_truncated_rate=0.01)

        assert perfect.requests[0].question != question
    assert run.scores == [
        ("strict-match", 0.95, FAULT_LIMIT),
        ("flexible-extract", 0.95, FAULT_LIMIT),
    ]
    assert (run.outcome.exit_code, run.doc["status"], run.doc["stage"]) == (1, "fail", "gate")
    assert run.outcome.reason == (
        "5.0% of answers were truncated or empty, over --max-truncated-rate 1.0%; strict-match "
        "0.9500 (95% CI 0.7639-0.9911, n=20), flexible-extract 0.9500 (95% CI 0.7639-0.9911, "
        "n=20) vs threshold 0.9000 (default)"
    )
