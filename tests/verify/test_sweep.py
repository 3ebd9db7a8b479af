"""verify on a run that stopped early (--early-stop): its sequential test decides, not its n."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalgate.errors import ExitCode
from evalgate.gate.sequential import SequentialTest
from evalgate.gate.verdict import Score
from evalgate.schemas import validation_errors
from evalgate.verify import collect, sweep
from tests.compare.run_files import paired_outcomes, write_run
from tests.conftest import run_subprocess
from tests.verify.sweeps import (
    found,
    parsed_thresholds,
    result_doc,
    sweep_of,
    thresholds,
    write_harness,
    write_result,
)


def _stopped(n: int, right: int, alpha: float, decision: str | None) -> dict[str, Any]:
    doc = result_doc(scores=(right / n, right / n), n=n, status="pass" if right else "fail")
    doc["eval"]["early_stop"] = {
        "mode": "both",
        "alpha": alpha,
        "prior_weight": 10.0,
        "order_seed": 1234,
        "stopped": decision is not None,
        "decision": decision,
        "questions": 1319,
        "questions_used": n,
        "questions_asked": n + 7,
        "filters": [
            {"filter": f, "right": right, "n": n, "e_value": 6.53, "certain": "above"}
            for f in ("strict-match", "flexible-extract")
        ],
    }
    assert validation_errors("result", doc) == []
    return doc


def _write(folder: Path, doc: dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "result.json").write_text(json.dumps(doc))
    return folder


@pytest.mark.unit
def test_the_case_is_one_the_interval_alone_cannot_decide():
    """35 of 35 right against dsr1's 0.91: the 95% Wilson interval starts at 0.901, but the
    run's sequential test at alpha 0.2 is certain (E = 6.5 >= 1 / 0.2)."""
    test = SequentialTest(0.91, ("strict-match", "flexible-extract"), alpha=0.2)
    assert test.side(35, 35) == "above"
    assert 5 <= test.e_value(35, 35) < 7


@pytest.mark.unit
def test_an_early_pass_is_accepted_though_n_is_small(tmp_path, cli):
    folder = _write(tmp_path / "run", _stopped(35, 35, 0.2, "pass"))
    code, out, _ = cli("verify", str(folder), "--no-github", "--json", str(tmp_path / "v.json"))
    assert code == 0, out
    verdict = json.loads((tmp_path / "v.json").read_text())
    (entry,) = verdict["entries"]
    assert entry["outcome"] == "pass"
    assert entry["reason"].endswith(
        "; stopped early after 35 of 1319 questions, the sequential test certain at alpha 0.2"
    )


@pytest.mark.unit
def test_the_same_scores_without_the_early_stop_are_inconclusive(tmp_path, cli):
    doc = _stopped(35, 35, 0.2, "pass")
    doc["eval"]["early_stop"]["stopped"] = False
    doc["eval"]["early_stop"]["decision"] = None
    folder = _write(tmp_path / "run", doc)
    code, out, _ = cli("verify", str(folder), "--no-github")
    assert code == 5, out
    assert "INCONCLUSIVE" in out


@pytest.mark.unit
def test_an_early_pass_is_not_certain_at_a_stricter_threshold(tmp_path, cli):
    folder = _write(tmp_path / "run", _stopped(35, 35, 0.2, "pass"))
    strict = tmp_path / "thresholds.json"
    strict.write_text(json.dumps({"default": {"gsm8k": 0.97}, "models": {"dsr1": {"gsm8k": 0.97}}}))
    code, out, _ = cli("verify", str(folder), "--no-github", "--thresholds", str(strict))
    assert code == 5, out  # 35 of 35 is neither certain above 0.97 nor below it


@pytest.mark.unit
def test_an_early_fail_is_a_failure(tmp_path, cli):
    folder = _write(tmp_path / "run", _stopped(5, 0, 0.05, "fail"))
    code, out, _ = cli("verify", str(folder), "--no-github")
    assert code == 1, out


# Every report names the task as --task does (gsm8k, not lm-eval's gsm8k_evalgate_chat).


@pytest.mark.loopback
def test_every_report_names_the_task_as_the_user_knows_it(dropped_sweeps, tmp_path):
    """The runs' scores are lm-eval's gsm8k_evalgate_chat: verify's page and job summary, its
    verdict document, history's page and table and compare's advice all say gsm8k."""
    base, dropped = dropped_sweeps
    out = tmp_path / "reports"
    summary = tmp_path / "summary.md"
    history = tmp_path / "history.db"
    assert "gsm8k_evalgate_chat" in (dropped / "dropped-conc8" / "result.json").read_text()
    done = run_subprocess(
        "verify", str(dropped), "--baseline", str(base), "--thresholds", str(thresholds(tmp_path)),
        "--html", str(out / "verify.html"), "--json", str(out / "verdict.json"), "--github",
        "--record", str(history), "--sweep-id", "s1",
        env={"GITHUB_STEP_SUMMARY": str(summary)},
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    page = (out / "verify.html").read_text(encoding="utf-8")
    assert "<figcaption>gsm8k: qwen3 h100 vllm fp8 kv=bf16 isl=1024 osl=1024: exact_match" in page
    assert 'title "gsm8k: score (bars), threshold (line)"' in summary.read_text(encoding="utf-8")
    shown = run_subprocess("history", str(history), "--html", str(out / "history.html"))
    assert shown.returncode == 0, shown.stderr
    assert "conc=8 [gsm8k]" in shown.stdout
    # compare: an inconclusive pair needing more questions than GSM8K has
    a, b = paired_outcomes(1319, lost=50, gained=40)
    compared = run_subprocess(
        "compare",
        str(write_run(tmp_path / "a", a)),
        str(write_run(tmp_path / "b", b)),
        "--html",
        str(out / "compare.html"),
    )
    assert compared.returncode == 5, compared.stderr
    assert "more than the 1319 questions gsm8k has: no rerun can settle it" in compared.stdout
    said = [done.stdout, shown.stdout, compared.stdout, summary.read_text(encoding="utf-8")]
    said += [path.read_text(encoding="utf-8") for path in sorted(out.iterdir())]
    assert [text for text in said if "gsm8k_evalgate" in text] == []


# Gating each result of a sweep: pass, fail or inconclusive on its scores and sample size.


def em(
    value: float,
    n: int = 1319,
    filt: str = "strict-match",
    task: str = "gsm8k",
    metric: str = "exact_match",
) -> Score:
    return Score(task=task, metric=metric, filter=filt, value=value, stderr=None, n=n)


def em2(value: float, n: int = 1319, task: str = "gsm8k") -> tuple[Score, Score]:
    """Both filters GSM8K's gate needs, at one value."""
    return em(value, n, task=task), em(value, n, "flexible-extract", task)


@pytest.mark.unit
def test_runs_judged_as_they_are_read_give_the_verdict_of_runs_judged_after_reading(tmp_path):
    """verify gates each run as it is read; judging the collected runs after gives the same
    report; two configs whose names collide are told apart by their models either way."""
    sweep_of(tmp_path, 20)
    write_result(tmp_path / "run-000b", model="other/model", hardware="h0", conc=1)
    write_harness(tmp_path / "harness-a")
    write_result(tmp_path / "zz-dup", hardware="h4", conc=20)  # a second result of run-019
    write_result(tmp_path / "zz-low", hardware="h9", scores=(0.5, 0.5))
    root = str(tmp_path)
    after = sweep.judge_sweep(
        collect.collect([root]), sweep.Rule(parsed_thresholds()), paths=[root]
    )
    assert sweep.verify([root], parsed_thresholds()) == after
    counts = {o: after.count(o) for o in ("pass", "fail", "malformed", "duplicate")}
    assert counts == {"pass": 22, "fail": 1, "malformed": 1, "duplicate": 1}
    [duplicate] = [e for e in after.entries if e.outcome == "duplicate"]
    assert "h4" in duplicate.key and "conc=20" in duplicate.key
    keys = [e.key for e in after.entries if e.path and "run-000" in e.path]
    assert len(keys) == 2 and len(set(keys)) == 2 and any("model=other/model" in k for k in keys)


FLOORS = {
    "default": {"gsm8k": 0.90},
    "models": {"dsr1": {"gsm8k": 0.91}},
    "overrides": [
        {"match": {"hardware": "mi355x", "precision": "fp4"}, "thresholds": {"gsm8k": 0.88}}
    ],
}


@pytest.mark.unit
@pytest.mark.parametrize(
    ("item", "outcome", "reason"),
    [
        (
            found(scores=(em(0.95), em(0.96, filt="flexible-extract"))),
            "pass",
            "strict-match 0.9500 (95% CI 0.9369-0.9605, n=1319), flexible-extract 0.9600",
        ),
        (
            found(scores=(em(0.95), em(0.85, filt="flexible-extract"))),
            "fail",
            "flexible-extract 0.8500 (95% CI 0.8297-0.8683, n=1319) below threshold 0.9100 "
            "(prefix:dsr1)",
        ),
        (
            found(scores=em2(0.92, n=50)),
            "inconclusive",
            "the 95% interval straddles the threshold and n < 1319",
        ),
        (found(scores=()), "fail", "no exact_match score was produced: nothing to gate"),
        (
            found(scores=(em(0.97),)),
            "fail",
            "no exact_match,flexible-extract score: the gsm8k gate needs every one of",
        ),
        (found(scores=(em(0.99, metric="acc"),)), "fail", "no exact_match score"),
        (
            found(status="error", reason="max_tokens=12288 cannot be greater than 2048"),
            "error",
            "run error in stage eval: max_tokens=12288 cannot be greater than 2048",
        ),
        (found(status="aborted", reason="interrupted"), "error", "run aborted in stage eval"),
        (
            found(status="running"),
            "error",
            "run interrupted: its result.json still says running, last recorded at stage eval",
        ),
        # the run failed on something other than its scores: truncation, failed requests
        (
            found(scores=em2(0.95), status="fail", reason="12% of answers truncated"),
            "fail",
            "the run failed: 12% of answers truncated",
        ),
        # the run failed on its scores at n = 50: verify's statistics decide
        (
            found(scores=em2(0.88, n=50), status="fail", failed_on_scores=True),
            "inconclusive",
            "straddles",
        ),
        (
            found(scores=em2(0.89), hardware="mi355x", precision="fp4", model_prefix="x"),
            "pass",
            "override[0]:hardware=mi355x,precision=fp4",
        ),
        (
            found(scores=em2(0.95, task="gsm8k_evalgate_chat"), model_prefix="qwen"),
            "pass",
            "threshold 0.9000 (default)",
        ),
        (found(scores=(em(0.95, task="mmlu"),)), "fail", "has no threshold for task 'mmlu'"),
    ],
)
def test_gate(item, outcome, reason):
    entry = sweep.Rule(parsed_thresholds(FLOORS)).gate(item, "key")
    assert entry.outcome == outcome
    assert reason in entry.reason


@pytest.mark.unit
def test_a_zero_written_minus_zero_and_a_score_that_is_not_a_number_fail_as_written():
    """-0.0 is a zero and fails as one, its reason showing the value as the file has it; a NaN
    fails (a value that is not a number is never a pass), and each is decided on its own."""
    rule = sweep.Rule(parsed_thresholds(FLOORS))
    zero, minus_zero, nan = (rule.gate(found(scores=em2(v)), "k") for v in (0.0, -0.0, math.nan))
    assert (zero.outcome, minus_zero.outcome, nan.outcome) == ("fail", "fail", "fail")
    assert "-0.0000" in minus_zero.reason and "-0.0000" not in zero.reason
    assert all(math.isnan(check.value) for check in nan.checks)
    assert rule.gate(found(scores=em2(0.95)), "k").outcome == "pass"  # the same rule, after them


@pytest.mark.unit
def test_gate_min_samples_zero_decides_on_the_point_estimate():
    item = found(scores=em2(0.92, n=50), model_prefix="kimi")
    assert sweep.Rule(parsed_thresholds(FLOORS)).gate(item, "k").outcome == "inconclusive"
    assert sweep.Rule(parsed_thresholds(FLOORS), min_samples=0).gate(item, "k").outcome == "pass"


@pytest.mark.unit
@settings(deadline=None)  # timing varies on a shared CI machine; the property does not
@given(
    values=st.lists(st.tuples(st.floats(0, 1), st.integers(0, 3000)), max_size=2),
    threshold=st.floats(0.05, 1),
    min_samples=st.integers(0, 3000),
    status=st.sampled_from([None, "pass", "fail"]),
)
def test_gate_never_passes_a_score_clearly_below_nor_nothing(
    values, threshold, min_samples, status
):
    names = ("strict-match", "flexible-extract")
    scores = tuple(em(v, n, filt=names[i]) for i, (v, n) in enumerate(values))
    item = found(scores=scores, status=status, failed_on_scores=True)
    rule = sweep.Rule(parsed_thresholds({"default": {"gsm8k": threshold}}), min_samples)
    entry = rule.gate(item, "k")
    if not scores:
        assert entry.outcome == "fail"
    for check in entry.checks:
        if check.value < threshold and check.high < threshold:
            assert entry.outcome == "fail"
    if entry.outcome == "pass":
        assert entry.checks and all(c.outcome == "pass" for c in entry.checks)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("task", "n", "outcome"),
    [
        ("gsm8k", 1319, "pass"),
        ("gsm8k_evalgate_chat", 1319, "pass"),
        ("gsm8k", 396, "inconclusive"),
        ("gpqa_diamond_cot_n_shot", 396, "pass"),
        ("gpqa_diamond_cot_n_shot", 198, "inconclusive"),
        ("swebench_lite", 300, "pass"),
    ],
)
def test_min_samples_defaults_to_each_tasks_full_size(task, n, outcome):
    """A full run of any gated task is decided on its score; a shorter one only beyond doubt."""
    rule = sweep.Rule(parsed_thresholds({"default": {task: 0.5}}))
    one = "extract_abcd" if task.startswith("gpqa") else "strict-match"  # GPQA's one filter
    scores = em2(0.52, n=n, task=task) if task.startswith("gsm8k") else (em(0.52, n, one, task),)
    entry = rule.gate(found(scores=scores), "k")
    assert entry.outcome == outcome, entry.reason
    assert entry.checks[0].threshold == 0.5


@pytest.mark.usefixtures("verify_only")
@pytest.mark.unit
def test_a_small_sample_is_inconclusive(tmp_path, cli):
    write_result(tmp_path, n=50, scores=(0.92, 0.92), prefix="kimik2.5")  # threshold 0.90
    code, out, _ = cli("verify", str(tmp_path))
    assert code == ExitCode.INCONCLUSIVE == 5
    assert "INCONCLUSIVE kimik2.5" in out
    assert "95% interval straddles the threshold and n < 1319" in out
    assert "evalgate verify: INCONCLUSIVE (exit 5)" in out
    code, out, _ = cli("verify", str(tmp_path), "--min-samples", "0")
    assert code == ExitCode.PASS


@pytest.mark.usefixtures("verify_only")
@pytest.mark.unit
def test_a_full_run_passes(tmp_path, cli):
    write_result(tmp_path / "run", scores=(0.95, 0.95), prefix="kimik2.5")
    code, out, _ = cli("verify", str(tmp_path))
    assert code == ExitCode.PASS
    assert "evalgate verify: PASS (exit 0): 1 results for 1 configs: 1 pass" in out
    assert "::" not in out  # no annotations outside GitHub Actions


@pytest.mark.usefixtures("verify_only")
@pytest.mark.unit
def test_inconclusive_and_failure_together_fail(tmp_path, cli):
    write_result(tmp_path / "a", n=50, scores=(0.92, 0.92), conc=1)
    write_result(tmp_path / "b", scores=(0.5, 0.5), conc=2)
    assert cli("verify", str(tmp_path))[0] == ExitCode.FAIL
