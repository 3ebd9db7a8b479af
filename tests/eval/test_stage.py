"""`evalgate run --early-stop` against the loopback engine; what verify and compare make of it."""

from __future__ import annotations

import json

import pytest

from evalgate.eval.stage import AnswerScorer, gated_filters
from evalgate.gate.sequential import SequentialTest
from evalgate.tasks.spec import load_task
from tests.conftest import deadline, load_result, load_samples, run_args
from tests.fakeengine import GSM8K_TEST, EngineBehaviour, FakeEngine


def _generation_requests(engine: FakeEngine) -> int:
    return sum(1 for r in engine.requests if r.path.endswith("completions")) - 1  # the probe


@pytest.fixture(scope="module")
def passed_early(tmp_path_factory):
    """An engine at 0.97 with --early-stop both: (result folder, requests the eval sent)."""
    out = tmp_path_factory.mktemp("early-pass")
    from evalgate.cli import main

    with FakeEngine(EngineBehaviour(max_model_len=4096, accuracy=0.97)) as engine:
        with deadline(120, engine):
            code = main(run_args(engine.url, out, early_stop="both"))
        sent = _generation_requests(engine)
    return code, out, sent


@pytest.mark.loopback
def test_a_097_engine_passes_after_at_most_400_questions(passed_early):
    code, out, sent = passed_early
    assert code == 0
    doc = load_result(out)
    record = doc["eval"]["early_stop"]
    assert doc["status"] == "pass"
    assert doc["reason"].endswith(
        f">= threshold 0.9000 (default); stopped early after {record['questions_used']} of 1319 "
        "questions, the sequential test certain at alpha 0.05"
    )
    assert doc["verdict"]["outcome"] == "pass"
    assert record["stopped"] is True and record["decision"] == "pass"
    assert record["mode"] == "both" and record["alpha"] == 0.05 and record["order_seed"] == 1234
    assert record["questions_asked"] <= 400
    assert sent == record["questions_asked"]  # nothing was sent after the stop
    assert record["questions_used"] <= record["questions_asked"]
    assert all(f["certain"] == "above" and f["e_value"] >= 20 for f in record["filters"])
    # The scores and samples are those of the questions the test read, in dispatch order.
    samples = load_samples(out)
    assert len(samples) == record["questions_used"]
    assert sorted(s["doc_id"] for s in samples) != list(range(len(samples)))  # shuffled order
    for score in doc["scores"]:
        right = sum(s["filters"][score["filter"]]["correct"] for s in samples)
        assert score["n"] == record["questions_used"]
        assert score["value"] == right / len(samples)
    filters = {f["filter"]: f for f in record["filters"]}
    assert {s["filter"]: round(s["value"] * s["n"]) for s in doc["scores"]} == {
        name: f["right"] for name, f in filters.items()
    }
    # lm-eval's own file would score the questions never asked as wrong: it is not written.
    assert doc["files"]["lm_eval_results"] is None
    assert not (out / "lm_eval_results.json").exists()


@pytest.mark.loopback
def test_verify_accepts_the_early_pass(passed_early, cli, tmp_path):
    _, out, _ = passed_early
    verdict = tmp_path / "verdict.json"
    result = cli("verify", str(out), "--no-github", "--json", str(verdict))
    assert result.code == 0, result.text
    (entry,) = json.loads(verdict.read_text())["entries"]
    assert entry["outcome"] == "pass"
    assert "stopped early after" in entry["reason"]


@pytest.mark.loopback
def test_compare_refuses_an_early_stopped_run(passed_early, engine, cli, tmp_path):
    _, out, _ = passed_early
    full = tmp_path / "full"
    assert cli(*run_args(engine.url, full, limit=20, min_samples=0)).code == 0
    result = cli("compare", str(full), str(out))
    assert result.code == 2
    assert f"The candidate run {out} stopped early (--early-stop both) after" in result.err
    assert "it is incomplete" in result.err
    assert "Compare runs made with --early-stop off." in result.err


@pytest.mark.loopback
def test_a_broken_engine_fails_after_at_most_40_questions(cli, tmp_path):
    with FakeEngine(EngineBehaviour(max_model_len=4096, accuracy=0.0)) as engine:
        with deadline(60, engine):
            result = cli(*run_args(engine.url, tmp_path, early_stop="both"))
        sent = _generation_requests(engine)
    assert result.code == 1
    assert result.out.startswith("FAIL: strict-match 0.0000 (95% CI 0.0000-")
    assert "; stopped early after 5 of 1319 questions, the sequential test certain" in result.out
    record = load_result(tmp_path)["eval"]["early_stop"]
    assert record["decision"] == "fail" and record["questions_asked"] <= 40
    assert sent <= 40
    verified = cli("verify", str(tmp_path), "--no-github")
    assert verified.code == 1


@pytest.mark.loopback
def test_a_088_engine_never_passes(cli, tmp_path):
    behaviour = EngineBehaviour(max_model_len=4096, accuracy=0.88)
    with FakeEngine(behaviour) as engine, deadline(240, engine):
        result = cli(*run_args(engine.url, tmp_path, early_stop="both"))
    assert result.code == 1, result.text
    doc = load_result(tmp_path)
    assert doc["status"] == "fail"
    assert doc["eval"]["early_stop"]["decision"] != "pass"


@pytest.mark.loopback
def test_a_088_engine_never_passes_though_its_wrong_answers_arrive_last(cli, tmp_path):
    """64 in flight, wrong answers 2 s, right ones at once: read as they arrived, the first
    fifty answers would all be right and pass a 0.88 engine."""
    behaviour = EngineBehaviour(max_model_len=4096, accuracy=0.88, wrong_latency_s=2.0)
    with FakeEngine(behaviour) as engine, deadline(240, engine):
        result = cli(*run_args(engine.url, tmp_path, early_stop="both", num_concurrent=64))
    assert result.code == 1, result.text
    doc = load_result(tmp_path)
    assert doc["status"] == "fail"
    assert doc["eval"]["early_stop"]["decision"] != "pass"
    # The journal holds the answers in arrival order: read that way, the same test would have
    # passed this engine.
    correct = {s["doc_id"]: s["filters"] for s in load_samples(tmp_path)}
    lines = (tmp_path / "journal.jsonl").read_text(encoding="utf-8").splitlines()[1:]  # header
    arrived = [correct[json.loads(line)["doc_id"]] for line in lines]
    test = SequentialTest(0.90, ("strict-match", "flexible-extract"))
    right = dict.fromkeys(test.filters, 0)
    outcomes = []
    for n, filters in enumerate(arrived, start=1):
        for name in right:
            right[name] += filters[name]["correct"]
        outcomes.append(test.outcome(right, n))
    assert "pass" in outcomes


@pytest.mark.loopback
def test_fail_mode_does_not_stop_a_passing_run(cli, tmp_path):
    with FakeEngine(EngineBehaviour(max_model_len=4096, accuracy=1.0)) as engine:
        with deadline(60, engine):
            result = cli(*run_args(engine.url, tmp_path, early_stop="fail", limit=100))
        sent = _generation_requests(engine)
    assert result.code == 0
    record = load_result(tmp_path)["eval"]["early_stop"]
    assert record["stopped"] is False and record["decision"] is None
    assert record["questions_used"] == record["questions_asked"] == 100 == sent
    assert record["filters"][0]["certain"] == "above"  # certain, but fail mode never passes early
    assert len(load_samples(tmp_path)) == 100


@pytest.mark.loopback
def test_early_stop_off_records_nothing_and_writes_lm_eval_results(engine, cli, tmp_path):
    result = cli(*run_args(engine.url, tmp_path, limit=20, min_samples=0))
    assert result.code == 0, result.text
    doc = load_result(tmp_path)
    assert doc["eval"]["early_stop"] is None
    sent = [r.question for r in engine.requests if r.path.endswith("completions")][1:]
    assert len(sent) == 20
    assert (tmp_path / "lm_eval_results.json").is_file()


@pytest.mark.loopback
def test_early_stop_with_a_baseline_is_refused_up_front(engine, cli, tmp_path):
    result = cli(*run_args(engine.url, tmp_path, early_stop="both", baseline=tmp_path))
    assert result.code == 2
    assert "a run stopped early cannot be compared with --baseline" in result.err
    assert not engine.requests


@pytest.mark.loopback
@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("0", "--alpha = 0.0 (set by --alpha or EVALGATE_ALPHA): out of range: give more than 0"),
        ("1.5", "--alpha = 1.5 (set by --alpha or EVALGATE_ALPHA): out of range: give more than 0"),
    ],
)
def test_a_bad_alpha_is_a_usage_error(engine, cli, tmp_path, value, says):
    result = cli(*run_args(engine.url, tmp_path, early_stop="both", alpha=value))
    assert result.code == 2
    assert says in result.err
    assert not engine.requests


# Live scoring of one answer: the task file's filters and exact_match, through lm-eval's code.

DOC = json.loads(GSM8K_TEST.read_text(encoding="utf-8").splitlines()[0])  # answer: 18


@pytest.mark.unit
@pytest.mark.parametrize("api", ["chat", "completions"])
def test_the_gated_filters_are_the_task_files(api):
    assert gated_filters(load_task(api)) == ("strict-match", "flexible-extract")


@pytest.mark.unit
@pytest.mark.parametrize(
    ("response", "strict", "flexible"),
    [
        ("She sells 16 - 3 - 4 = 9 eggs, 9 * 2 = 18.\n#### 18", True, True),
        ("#### 18.", True, True),  # a trailing period is ignored
        ("#### $18", False, True),  # strict-match wants a number right after '#### '
        ("So she makes 18 dollars.", False, True),  # flexible reads the last number
        ("#### 18\nQuestion: next one, 5 apples", True, False),  # ... the last one here is 5
        ("#### 19", False, False),
        ("", False, False),
        ("#### 1,8", True, True),  # commas are ignored on both sides
    ],
)
def test_answers_are_scored_as_lm_eval_scores_them(response, strict, flexible):
    scorer = AnswerScorer(load_task("chat"))
    assert scorer(DOC, response) == {"strict-match": strict, "flexible-extract": flexible}
