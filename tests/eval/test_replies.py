"""InlineThinking (evalgate.eval.replies): the part of an answer scored when its thinking is
written into it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from evalgate.eval.replies import InlineThinking, Split
from tests.conftest import (
    DOCS,
    FAULT_ACCURACY,
    FAULT_LIMIT,
    FAULT_RUN,
    MODEL,
    THINKING_FIELDS,
    THINKING_QUESTIONS,
    THINKING_RUN,
    assert_error,
    eval_attempts,
    gate,
    load_result,
    load_samples,
    run_args,
)
from tests.fakeengine import (
    CHAT_PATH,
    FILLER,
    NOT_PROBE,
    EngineBehaviour,
    FakeEngine,
    Fault,
    count_tokens,
)

SPLITS = [
    # (case, markers, answer as sent, split)
    (
        "closed: only what follows the end marker",
        InlineThinking(),
        "<think>so #### 3</think> so #### 5",
        Split(" so #### 5", "<think>so #### 3</think>", ended=True),
    ),
    (
        "no opening marker (the template opened the block): what follows the end",
        InlineThinking(),
        "so #### 3\n</think>\n#### 5",
        Split("\n#### 5", "so #### 3\n</think>", ended=True),
    ),
    (
        "several end markers: after the last",
        InlineThinking(),
        "<think>a</think>b<think>c</think>#### 5",
        Split("#### 5", "<think>a</think>b<think>c</think>", ended=True),
    ),
    (
        "cut before the end marker: no answer at all",
        InlineThinking(),
        "<think>\nso far #### 3 and",
        Split("", "<think>\nso far #### 3 and", ended=False),
    ),
    ("no thinking: unchanged", InlineThinking(), "#### 5", Split("#### 5", None, ended=True)),
    (
        "no end marker set: the whole answer, as the harness scores it",
        InlineThinking(end=""),
        "<think>#### 3</think>#### 5",
        Split("<think>#### 3</think>#### 5", None, ended=True),
    ),
    (
        "no start marker set: an unended block is not recognised",
        InlineThinking(start=""),
        "<think>#### 3",
        Split("<think>#### 3", None, ended=True),
    ),
    (
        "other markers",
        InlineThinking("<|begin_of_thought|>", "<|end_of_thought|>"),
        "<|begin_of_thought|>#### 3<|end_of_thought|>#### 5",
        Split("#### 5", "<|begin_of_thought|>#### 3<|end_of_thought|>", ended=True),
    ),
]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("markers", "text", "expected"), [c[1:] for c in SPLITS], ids=[c[0] for c in SPLITS]
)
def test_split(markers, text, expected):
    assert markers.split(text) == expected


# Reasoning models: the thinking kept, answers cut while thinking counted, and the request options
# that steer thinking sent in every request.


def _probed_once_streamed(engine: FakeEngine, doc: dict[str, object]) -> None:
    """The run's one streamed request, the probe, was answered and accepted."""
    streamed = [r for r in engine.requests if r.stream]
    assert [(r.path, r.status) for r in streamed] == [(CHAT_PATH, 200)]
    assert doc["probe"] == doc["probe"] | {"outcome": "ok", "status_code": 200}


@pytest.mark.loopback
@THINKING_FIELDS
def test_answers_cut_while_thinking_are_counted_kept_and_warned_about(cli, tmp_path, field):
    behaviour = EngineBehaviour(thinking=field, endless_thinking=0.3)
    with FakeEngine(behaviour) as engine:
        result = cli(*run_args(engine.url, tmp_path, max_truncated_rate="0.2", **THINKING_RUN))
    assert result.code == 1, result.text
    doc = load_result(tmp_path)
    _probed_once_streamed(engine, doc)
    budget = doc["eval"]["max_tokens"]
    requests = doc["eval"]["requests"]
    assert requests["cut_while_thinking"] == 30
    assert requests["from_reasoning"] == 30
    assert requests["truncated"] == 30 and requests["empty"] == 0
    thought = 6 * count_tokens(FILLER)  # the 40 tokens asked, in whole filler sentences
    assert requests["reasoning_tokens"] == {
        "answers": THINKING_QUESTIONS,
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
    cut = [s for s in samples if s["answer_field"] == field]
    assert len(cut) == 30
    assert all(s["finish_reason"] == "length" and s["reasoning_tokens"] == budget for s in cut)
    answered = [s for s in samples if s["answer_field"] == "content"]
    assert all(s["response"].rstrip().split("\n")[-1].startswith("#### ") for s in answered)
    assert all(s["reasoning_tokens"] == thought for s in answered)


@pytest.mark.loopback
@THINKING_FIELDS
def test_thinking_that_ends_in_time_passes_and_keeps_the_reasoning(cli, tmp_path, field):
    with FakeEngine(EngineBehaviour(thinking=field)) as engine:
        result = cli(*run_args(engine.url, tmp_path, **THINKING_RUN))
    assert result.code == 0, result.text
    doc = load_result(tmp_path)
    _probed_once_streamed(engine, doc)
    requests = doc["eval"]["requests"]
    assert requests["cut_while_thinking"] == 0 and requests["from_reasoning"] == 0
    assert requests["reasoning_tokens"]["answers"] == THINKING_QUESTIONS
    samples = load_samples(tmp_path)
    assert len(samples) == THINKING_QUESTIONS
    assert all(
        s["reasoning"].startswith(FILLER) and s["answer_field"] == "content" for s in samples
    )


@pytest.mark.loopback
def test_a_plain_model_reports_no_reasoning(engine, cli, tmp_path):
    assert cli(*run_args(engine.url, tmp_path, **THINKING_RUN)).code == 0
    requests = load_result(tmp_path)["eval"]["requests"]
    assert requests["reasoning_tokens"] is None and requests["cut_while_thinking"] == 0
    assert requests["inline_thinking"] == 0  # no thinking: the whole answer, unchanged
    samples = load_samples(tmp_path)
    assert all(s["reasoning"] is None for s in samples)
    assert all(s["response"].startswith("Janet") for s in samples if s["doc_id"] == 0)


INLINE = pytest.mark.parametrize("api", ["chat", "completions"])


def failed_thinking_inline(cli: Any, out: Path, behaviour: EngineBehaviour, **options: object):
    """result.json of a run that fails (exit 1) against an engine writing its thinking into
    every answer (`behaviour`)."""
    with FakeEngine(behaviour) as engine:
        result = cli(*run_args(engine.url, out, **options, **THINKING_RUN))
    assert result.code == 1, result.text
    doc = load_result(out)
    assert doc["eval"]["requests"]["inline_thinking"] == THINKING_QUESTIONS
    return doc


@pytest.mark.loopback
@INLINE
def test_thinking_in_the_answer_is_not_scored_only_what_follows_its_end(cli, tmp_path, api):
    """`<think> … #### 18 …</think> … #### 19`: the answer is 19, whatever the scratchpad says.
    Every answer is wrong (accuracy 0) while every scratchpad holds the right number."""
    behaviour = EngineBehaviour(inline_thinking="open", accuracy=0.0)
    doc = failed_thinking_inline(cli, tmp_path, behaviour, api=api)
    requests = doc["eval"]["requests"]
    assert requests["cut_while_thinking"] == 0 and requests["truncated"] == 0
    assert all(s["value"] == 0.0 for s in doc["scores"])
    for sample in load_samples(tmp_path):
        assert not sample["response"].startswith(("<think>", " <think>"))
        assert sample["response"].lstrip().split("\n")[-1].startswith("#### ")
        assert sample["reasoning"].lstrip().startswith("<think>\nA first guess: #### ")
        assert sample["reasoning"].endswith("</think>")
        assert sample["answer_field"] == ("content" if api == "chat" else "text")
        assert not any(f["correct"] for f in sample["filters"].values())


@pytest.mark.loopback
def test_an_end_marker_without_its_start_scores_what_follows(cli, tmp_path):
    """A chat template that opens the block in the prompt: the answer holds only `</think>`."""
    behaviour = EngineBehaviour(inline_thinking="prompt", accuracy=0.5)
    doc = failed_thinking_inline(cli, tmp_path, behaviour)  # half right: below the threshold
    assert all(s["value"] == 0.5 for s in doc["scores"])
    samples = load_samples(tmp_path)
    assert all("</think>" not in s["response"] for s in samples)
    assert all(s["reasoning"].startswith("A first guess: #### ") for s in samples)


@pytest.mark.loopback
@INLINE
def test_an_answer_cut_inside_its_thinking_scores_nothing(cli, tmp_path, api):
    """30 of 100 answers run out of budget before `</think>`: scored from their scratchpad
    (as a whole-text scorer does) every answer would be right and the run would pass."""
    behaviour = EngineBehaviour(inline_thinking="open", endless_thinking=0.3)
    doc = failed_thinking_inline(cli, tmp_path, behaviour, api=api)
    requests = doc["eval"]["requests"]
    assert requests["cut_while_thinking"] == 30 and requests["truncated"] == 30
    assert requests["empty"] == 0 and requests["from_reasoning"] == 0
    assert all(s["value"] == 0.7 for s in doc["scores"])
    budget = doc["eval"]["max_tokens"]
    warning = (
        f"30 answer(s) ran out of the {budget}-token budget while still thinking (30.0% of 100: "
        "thinking written into the answer, finish_reason length before its end marker; "
        "scored as no answer)"
    )
    assert any(w.startswith(warning) for w in doc["warnings"]), doc["warnings"]
    cut = [s for s in load_samples(tmp_path) if s["finish_reason"] == "length"]
    assert len(cut) == 30
    for sample in cut:
        assert sample["response"] == ""
        assert "</think>" not in sample["reasoning"]
        assert {f["extracted"] for f in sample["filters"].values()} == {"[invalid]"}


@pytest.mark.loopback
def test_an_empty_end_marker_scores_the_whole_answer_as_the_harness_does(cli, tmp_path):
    """--think-end-marker '': the harness's way, so the scratchpads of the cut answers count."""
    behaviour = EngineBehaviour(inline_thinking="open", endless_thinking=0.3)
    with FakeEngine(behaviour) as engine:
        result = cli(*run_args(engine.url, tmp_path, think_end_marker="", **THINKING_RUN))
    assert result.code == 0, result.text
    doc = load_result(tmp_path)
    requests = doc["eval"]["requests"]
    assert requests["inline_thinking"] == 0 and requests["cut_while_thinking"] == 0
    assert requests["truncated"] == 30
    assert all(s["value"] == 1.0 for s in doc["scores"])
    assert all(s["response"].startswith("<think>") for s in load_samples(tmp_path))


@pytest.mark.loopback
def test_a_resumed_run_takes_the_thinking_apart_again(cli, tmp_path):
    """The journal keeps each answer as it came: resumed, it is scored and counted alike."""
    behaviour = EngineBehaviour(inline_thinking="open", endless_thinking=0.3)
    with FakeEngine(behaviour) as engine:
        assert cli(*run_args(engine.url, tmp_path, **THINKING_RUN)).code == 1
        first = load_result(tmp_path)
        engine.clear()
        result = cli(*run_args(engine.url, tmp_path, "--resume", "--overwrite", **THINKING_RUN))
        asked = [r for r in engine.requests if not r.stream]
    assert result.code == 1, result.text
    assert asked == []  # every answer came from the journal
    again = load_result(tmp_path)
    assert again["eval"]["requests"]["resumed"] == THINKING_QUESTIONS
    for key in ("inline_thinking", "cut_while_thinking", "truncated"):
        assert again["eval"]["requests"][key] == first["eval"]["requests"][key]
    assert again["scores"] == first["scores"]


# Faults in the eval: retried to --max-attempts, then an eval error; answers that are none counted.


@pytest.mark.usefixtures("nineteen_of_twenty")
@pytest.mark.loopback
def test_acceptance_a_hanging_server_fails_within_its_timeout_with_the_stage_named(
    engine, tmp_path, cli
):
    engine.inject(Fault("hang", nth=NOT_PROBE))
    out = tmp_path / "run"

    started = time.monotonic()
    code, stdout, stderr = cli(
        *run_args(engine.url, out, **(FAULT_RUN | {"timeout": 0.5, "max_attempts": 2})),
        within=20,
        engine=engine,
    )
    elapsed = time.monotonic() - started

    doc = load_result(out)
    assert code == 4
    assert "stage: eval" in stderr
    assert "EvalFailedError: " in stderr
    assert "failed after 2 attempt(s) each" in stderr
    assert "no answer: request timed out (--timeout)" in stderr
    assert stdout == ""  # no verdict: the error is said once, on stderr
    assert (doc["status"], doc["stage"], doc["exit_code"]) == ("error", "eval", 4)
    assert doc["timings"]["eval"] < 0.5 * 2 + 2  # two attempts of 0.5 s, and lm-eval's setup
    assert elapsed < 15
    assert max(eval_attempts(engine).values()) <= 2


FAILED: list[tuple[str, Callable[[], Fault], str]] = [
    # (case, fault on every eval request, key sentence)
    (
        "connection reset",
        lambda: Fault("reset", nth=NOT_PROBE),
        "no answer: connection failed (ConnectionResetError: [Errno 104] Connection reset by peer)",
    ),
    (
        "503 all circuits open",
        lambda: Fault("router_busy", nth=NOT_PROBE),
        "HTTP 503: all circuits open",
    ),
    ("500", lambda: Fault("error", nth=NOT_PROBE), "HTTP 500: injected fault"),
    (
        "malformed JSON body",
        lambda: Fault("malformed_json", nth=NOT_PROBE),
        "HTTP 200: malformed answer: body is not JSON",
    ),
    (
        "connection dies mid-answer",
        lambda: Fault("die_mid_stream", nth=NOT_PROBE),
        "no answer: connection failed (",
    ),
]


@pytest.mark.usefixtures("nineteen_of_twenty")
@pytest.mark.parametrize(
    ("make_fault", "says"), [case[1:] for case in FAILED], ids=[case[0] for case in FAILED]
)
@pytest.mark.loopback
def test_a_fault_that_outlasts_the_retries_is_an_eval_error(engine, tmp_path, make_fault, says):
    engine.inject(make_fault())

    run = gate(engine, tmp_path / "run")

    assert_error(run, code=4, stage="eval", says="failed after 3 attempt(s) each (allowed: 0")
    assert says in run.outcome.reason
    assert "A failed request cannot be scored, so the run cannot be gated." in run.outcome.reason
    assert run.requests["failed"] >= 1
    assert max(eval_attempts(engine).values()) == 3  # --max-attempts, not one more
    assert engine.total < 1 + 2 * 4 * 3  # no storm: about one round per concurrency slot
    failed = [s for s in run.samples() if s["error"]]
    assert failed and all(says in s["error"] for s in failed)
    assert run.doc["files"]["samples"] == "samples.jsonl"


@pytest.mark.usefixtures("nineteen_of_twenty")
@pytest.mark.loopback
def test_the_message_counts_the_failed_requests_the_result_counts(engine, tmp_path):
    engine.inject(Fault("error", nth=NOT_PROBE))  # every eval request, all of them at once

    run = gate(engine, tmp_path / "run", num_concurrent=FAULT_LIMIT, max_attempts=2)

    failed = run.requests["failed"]  # how many were in flight then depends on timing
    assert failed >= 1
    assert_error(
        run, code=4, stage="eval", says=f"{failed} request(s) failed after 2 attempt(s) each"
    )
    assert len([s for s in run.samples() if s["error"]]) == failed


@pytest.mark.usefixtures("nineteen_of_twenty")
@pytest.mark.loopback
def test_one_question_that_always_fails_is_counted_not_scored(engine, tmp_path):
    question = DOCS[7].question
    fault = engine.inject(Fault("error", questions={question}))

    run = gate(engine, tmp_path / "run", num_concurrent=1)

    assert engine.requests[0].question != question  # the probe asked another question
    assert_error(run, code=4, stage="eval", says="1 request(s) failed after 3 attempt(s) each")
    assert "question 7: HTTP 500: injected fault" in run.outcome.reason
    assert fault.hits == 3 == eval_attempts(engine)[question.strip()]
    assert run.requests["failed"] == 1
    assert [s["doc_id"] for s in run.samples() if s["error"]] == [7]


@pytest.mark.usefixtures("nineteen_of_twenty")
@pytest.mark.loopback
def test_the_error_budget_lets_a_failed_request_through_as_a_wrong_answer(engine, tmp_path):
    question = DOCS[7].question  # answered right by the engine when it answers
    engine.inject(Fault("error", questions={question}))

    run = gate(engine, tmp_path / "run", num_concurrent=1, max_failed_requests=1)

    assert (run.outcome.exit_code, run.doc["status"]) == (0, "pass")
    assert run.scores == [
        ("strict-match", 0.9, FAULT_LIMIT),
        ("flexible-extract", 0.9, FAULT_LIMIT),
    ]
    assert run.requests["failed"] == 1
    assert (
        "1 request(s) failed and were scored as wrong (allowed by --max-failed-requests 1)"
        in run.doc["warnings"]
    )
    failed = next(s for s in run.samples() if s["doc_id"] == 7)
    assert failed["error"] == "HTTP 500: injected fault"
    assert failed["filters"]["strict-match"]["correct"] is False


@pytest.mark.usefixtures("nineteen_of_twenty")
@pytest.mark.parametrize(
    "make_fault",
    [
        lambda q: Fault("error", status=400, questions={q}, message="prompt is unusual"),
        lambda q: Fault("router_wrapped", questions={q}, message="prompt is unusual"),
    ],
    ids=["400", "router's 500 wrapping a worker's 400"],
)
@pytest.mark.loopback
def test_a_4xx_for_one_question_stops_the_eval_at_once(engine, tmp_path, make_fault):
    question = DOCS[7].question
    fault = engine.inject(make_fault(question))

    run = gate(engine, tmp_path / "run", num_concurrent=1, max_attempts=5)

    assert engine.requests[0].question != question
    assert_error(run, code=4, stage="eval", says="The engine rejected question 7 (HTTP ")
    assert "prompt is unusual). Retrying cannot change this answer" in run.outcome.reason
    assert fault.hits == 1  # sent once, never retried
    assert run.requests["retried"] == 0
    assert engine.total <= 1 + 8 + 1  # the probe, questions 0-7, at most one more in flight


@pytest.mark.usefixtures("nineteen_of_twenty")
@pytest.mark.loopback
def test_the_engine_going_away_mid_eval_is_an_eval_error(engine, tmp_path):
    engine.inject(Fault("hang", nth=NOT_PROBE))

    def kill_when_busy() -> None:
        if engine.wait_until(lambda e: e.hanging >= 1, timeout=20):
            engine.stop()

    killer = threading.Thread(target=kill_when_busy, daemon=True)
    killer.start()
    run = gate(engine, tmp_path / "run", timeout=20, within=25)
    killer.join(5)

    assert_error(run, code=4, stage="eval", says="no answer: connection failed")
    assert run.doc["timings"]["eval"] < 10  # it did not wait for the 20 s timeout


@pytest.mark.usefixtures("nineteen_of_twenty")
@pytest.mark.parametrize(
    ("action", "counter", "warning"),
    [
        ("empty_content", "empty", "0 answer(s) ended by length and 1 came back empty"),
        ("null_content", "empty", "0 answer(s) ended by length and 1 came back empty"),
        ("length", "truncated", "1 answer(s) ended by length and 0 came back empty"),
    ],
    ids=["empty content", "null content", "finish_reason length"],
)
@pytest.mark.loopback
def test_truncated_and_empty_answers_are_counted_and_reported(
    engine, tmp_path, action, counter, warning
):
    question = DOCS[3].question  # answered right when answered whole
    engine.inject(Fault(action, questions={question}))

    run = gate(engine, tmp_path / "run")

    assert engine.requests[0].question != question  # the probe asked another question
    assert run.requests[counter] == 1
    assert run.requests["failed"] == 0
    assert f"{warning} (5.0% of {FAULT_LIMIT})" in run.doc["warnings"]
    sample = next(s for s in run.samples() if s["doc_id"] == 3)
    assert sample["finish_reason"] == ("length" if action == "length" else "stop")
    assert not any(f["correct"] for f in sample["filters"].values())
    # an answer, scored as given: 18 of 20 is still 0.90, and the default
    # --max-truncated-rate 1.0 only reports
    assert run.scores == [
        ("strict-match", 0.9, FAULT_LIMIT),
        ("flexible-extract", 0.9, FAULT_LIMIT),
    ]
    assert (run.outcome.exit_code, run.doc["status"]) == (0, "pass")


@pytest.mark.usefixtures("nineteen_of_twenty")
@pytest.mark.loopback
def test_an_answer_stopped_by_a_content_filter_is_counted_and_reported(engine, tmp_path):
    question = DOCS[3].question
    engine.inject(Fault("content_filter", questions={question}))

    run = gate(engine, tmp_path / "run")

    assert run.requests["truncated"] == 1
    assert (
        "1 answer(s) stopped by the engine's content filter (finish_reason content_filter)"
        in (run.doc["warnings"])
    )
    sample = next(s for s in run.samples() if s["doc_id"] == 3)
    assert sample["finish_reason"] == "content_filter"


@pytest.mark.loopback
def test_answers_naming_another_model_are_scored_with_a_warning(tmp_path):
    with FakeEngine(
        EngineBehaviour(accuracy=FAULT_ACCURACY, response_model="other-model")
    ) as other:
        run = gate(other, tmp_path / "run")

    assert run.outcome.exit_code == 0
    assert (
        f"{FAULT_LIMIT} answer(s) came from model 'other-model', not the requested {MODEL!r}: "
        "check that --base-url reaches the engine serving it"
    ) in run.doc["warnings"]


@pytest.mark.loopback
def test_the_clean_run_has_no_model_warning(clean_run):
    assert not any("came from model" in w for w in clean_run.doc["warnings"])


@pytest.mark.loopback
def test_an_answer_far_beyond_its_budget_is_cut_before_it_is_stored(tmp_path, clean_run):
    with FakeEngine(EngineBehaviour(accuracy=FAULT_ACCURACY, overlong_chars=2_000_000)) as engine:
        run = gate(engine, tmp_path / "run", limit=3, timeout=30)

    budget = run.doc["context"]["max_tokens"]
    samples = run.samples()
    assert all(len(s["response"]) <= 64 * budget for s in samples)
    assert (tmp_path / "run" / "samples.jsonl").stat().st_size < 3 * 64 * budget + 10_000
    assert (tmp_path / "run" / "journal.jsonl").stat().st_size < 3 * 64 * budget + 10_000
    assert run.requests["truncated"] == 3
    assert any(
        "3 answer(s) were longer than max_tokens allows" in w and "cut to" in w
        for w in run.doc["warnings"]
    )


@pytest.mark.parametrize("router", ["vllm-router", "sglang-router"])
@pytest.mark.loopback
def test_a_worker_killed_behind_the_router_is_named_unreachable(tmp_path, cli, router):
    """vllm-router's 500 "... Connection refused (os error 111)" is no HTTP status 111 from the
    worker, and no verdict on the prompt: the worker at that URL went away."""
    worker = "http://127.0.0.1:18201"
    with FakeEngine(EngineBehaviour(accuracy=FAULT_ACCURACY, router=router)) as front:
        front.inject(Fault("worker_unreachable", nth=NOT_PROBE, worker_url=worker))
        out = tmp_path / "run"

        started = time.monotonic()
        code, stdout, stderr = cli(
            *run_args(front.url, out, served_max_model_len=4096, **FAULT_RUN),
            within=30,
            engine=front,
        )
        elapsed = time.monotonic() - started

    doc = load_result(out)
    assert (code, doc["status"], doc["stage"], doc["exit_code"]) == (4, "error", "eval", 4)
    reason = doc["reason"]
    assert f"The worker {worker} behind the router is unreachable" in reason
    assert "the engine went away" in reason
    assert "rejected" not in reason and "the prompt is unusual" not in reason
    assert "worker said 111" not in reason
    assert f"EvalFailedError: {reason}" in stderr
    assert stdout == ""  # no verdict: the error is said once, on stderr
    assert max(eval_attempts(front).values()) == 3  # retried like a refused connection
    assert elapsed < 15
    failed = [s for s in load_samples(out) if s["error"]]
    assert failed and all(f"worker {worker} is unreachable" in s["error"] for s in failed)
