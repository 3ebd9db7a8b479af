"""Reasoning models: the thinking kept, answers cut while thinking counted, and the request
options that steer thinking sent in every request."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import FAST, load_result, load_samples
from tests.fakeengine import CHAT_PATH, FILLER, EngineBehaviour, FakeEngine, count_tokens

QUESTIONS = 100


def _args(engine: FakeEngine, out: Path, *extra: str) -> list[str]:
    return [
        "run",
        "--base-url",
        engine.url,
        "--model",
        "fake-model",
        "--isl",
        "1024",
        "--osl",
        "512",
        "--output-dir",
        str(out),
        "--num-concurrent",
        "8",
        "--limit",
        str(QUESTIONS),
        "--min-samples",
        "0",
        *FAST,
        *extra,
    ]


def test_answers_cut_while_thinking_are_counted_kept_and_warned_about(cli, tmp_path):
    behaviour = EngineBehaviour(thinking="reasoning_content", endless_thinking=0.3)
    with FakeEngine(behaviour) as engine:
        result = cli(*_args(engine, tmp_path, "--max-truncated-rate", "0.2"))
    assert result.code == 1, result.text
    doc = load_result(tmp_path)
    budget = doc["eval"]["max_tokens"]
    requests = doc["eval"]["requests"]
    assert requests["cut_while_thinking"] == 30
    assert requests["from_reasoning"] == 30
    assert requests["truncated"] == 30 and requests["empty"] == 0
    thought = 6 * count_tokens(FILLER)  # the 40 tokens asked, in whole filler sentences
    assert requests["reasoning_tokens"] == {
        "answers": QUESTIONS,
        "median": float(thought),
        "p95": float(budget),
        "max": budget,
    }
    warning = (
        f"30 answer(s) ran out of the {budget}-token budget while still thinking (30.0% of 100: "
        "no content, finish_reason length; scored from their reasoning): holding them takes a "
        f"budget above {budget} tokens, e.g. --max-tokens {2 * budget}"
    )
    assert any(w.startswith(warning) for w in doc["warnings"]), doc["warnings"]
    assert (
        "30.0% of answers were truncated or empty, over --max-truncated-rate 20.0%"
        in (doc["reason"])
    )
    samples = load_samples(tmp_path)
    assert all(s["reasoning"] and s["reasoning"].startswith(FILLER) for s in samples)
    cut = [s for s in samples if s["answer_field"] == "reasoning_content"]
    assert len(cut) == 30
    assert all(s["finish_reason"] == "length" and s["reasoning_tokens"] == budget for s in cut)
    answered = [s for s in samples if s["answer_field"] == "content"]
    assert all(s["response"].rstrip().split("\n")[-1].startswith("#### ") for s in answered)
    assert all(s["reasoning_tokens"] == thought for s in answered)


def test_thinking_that_ends_in_time_passes_and_keeps_the_reasoning(cli, tmp_path):
    with FakeEngine(EngineBehaviour(thinking="reasoning")) as engine:
        result = cli(*_args(engine, tmp_path))
    assert result.code == 0, result.text
    requests = load_result(tmp_path)["eval"]["requests"]
    assert requests["cut_while_thinking"] == 0 and requests["from_reasoning"] == 0
    assert requests["reasoning_tokens"]["answers"] == QUESTIONS
    assert all(s["reasoning"] for s in load_samples(tmp_path))


def test_a_plain_model_reports_no_reasoning(engine, cli, tmp_path):
    assert cli(*_args(engine, tmp_path)).code == 0
    requests = load_result(tmp_path)["eval"]["requests"]
    assert requests["reasoning_tokens"] is None and requests["cut_while_thinking"] == 0
    assert all(s["reasoning"] is None for s in load_samples(tmp_path))


def test_thinking_options_go_into_every_request_the_probe_s_included(engine, cli, tmp_path):
    result = cli(
        *_args(
            engine,
            tmp_path,
            "--chat-template-kwargs",
            '{"enable_thinking": false}',
            "--reasoning-effort",
            "low",
        )
    )
    assert result.code == 0, result.text
    bodies = [r.body for r in engine.requests if r.path == CHAT_PATH]
    assert len(bodies) == QUESTIONS + 1  # the questions and the probe
    assert any(b.get("stream") for b in bodies)  # the probe is the streamed one
    assert all(b["chat_template_kwargs"] == {"enable_thinking": False} for b in bodies)
    assert all(b["reasoning_effort"] == "low" for b in bodies)
    recorded = load_result(tmp_path)["eval"]
    assert recorded["chat_template_kwargs"] == {"enable_thinking": False}
    assert recorded["reasoning_effort"] == "low"


def test_chat_template_kwargs_must_be_a_json_object(engine, cli, tmp_path):
    result = cli(*_args(engine, tmp_path, "--chat-template-kwargs", "enable_thinking=false"))
    assert result.code == 2
    assert "--chat-template-kwargs = 'enable_thinking=false'" in result.err
    assert "not JSON (Expecting value); give a JSON object such as" in result.err
    assert engine.requests == []
