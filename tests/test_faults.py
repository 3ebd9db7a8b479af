"""Faults and bad input, end to end: evalgate loses nothing and never passes by accident.

Every test drives a whole `evalgate run` (the library's `run_gate`, or the CLI's `main`) against
the fake engine on 127.0.0.1 with one fault injected, and checks what a user sees: the exit
code, the stage and the key sentence of the message, the result.json on disk (schema-valid on
every path), and the engine's own counters (nothing is retried more often than --max-attempts,
a 4xx is sent once). A fault that can be outlasted must give the same scores as a clean run; one
that cannot must end with the right exit code within a bounded time. RELIABILITY.md lists each
fault with its outcome and the test here that shows it.

Timings are tiny (zero backoff, sub-second timeouts) and every test runs under a deadline: when
it passes, the engine is stopped, which ends every hung or delayed request, and the test fails.
"""

from __future__ import annotations

import contextlib
import http.server
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from evalgate.errors import RequestFailed
from evalgate.tasks.dataset import bundled_dir
from tests.conftest import (
    DOCS,
    FAULT_ACCURACY,
    FAULT_LIMIT,
    FAULT_RUN,
    MODEL,
    Gate,
    assert_error,
    deadline,
    eval_attempts,
    eval_client,
    gate,
    load_result,
    load_samples,
    run_args,
)
from tests.fakeengine import NOT_PROBE, EngineBehaviour, FakeEngine, Fault, refused_url

pytestmark = pytest.mark.loopback


def correct_by_doc(run: Gate) -> dict[int, dict[str, bool]]:
    return {
        s["doc_id"]: {name: f["correct"] for name, f in s["filters"].items()} for s in run.samples()
    }


# -- faults a run outlasts: same scores as a clean run ------------------------------------------

RECOVERED: list[tuple[str, Callable[[], Fault], dict[str, Any], bool]] = [
    # (case, fault, settings, retried once per hit)
    (
        "connection reset, once per question",
        lambda: Fault("reset", nth=NOT_PROBE, times_per_question=1),
        {},
        True,
    ),
    (
        "connection closed without an answer, once per question",
        lambda: Fault("close", nth=NOT_PROBE, times_per_question=1),
        {},
        True,
    ),
    (
        "500 on a third of the questions, once each",
        lambda: Fault("error", nth=NOT_PROBE, share=0.3, times_per_question=1),
        {},
        True,
    ),
    (
        "429 on a third of the questions, once each",
        lambda: Fault("error", status=429, nth=NOT_PROBE, share=0.3, times_per_question=1),
        {},
        True,
    ),
    (
        "503 all circuits open, twice per question (3 attempts)",
        lambda: Fault("router_busy", nth=NOT_PROBE, times_per_question=2),
        {},
        True,
    ),
    (
        "malformed JSON body, once per question",
        lambda: Fault("malformed_json", nth=NOT_PROBE, times_per_question=1),
        {},
        True,
    ),
    (
        "connection dies mid-answer, once per question",
        lambda: Fault("die_mid_stream", nth=NOT_PROBE, times_per_question=1),
        {},
        True,
    ),
    (
        "slow answers, within --timeout",
        lambda: Fault("delay", delay_s=0.05, nth=NOT_PROBE, share=0.5),
        {},
        False,
    ),
    (
        "an answer slower than --timeout, once per question",
        lambda: Fault("delay", delay_s=5.0, nth=NOT_PROBE, share=0.3, times_per_question=1),
        {"timeout": 0.3},
        True,
    ),
]


@pytest.mark.usefixtures("nineteen_of_twenty")
@pytest.mark.parametrize("case", [c[1:] for c in RECOVERED], ids=[c[0] for c in RECOVERED])
def test_a_fault_that_passes_gives_the_clean_runs_scores(engine, tmp_path, clean_run, case):
    make_fault, overrides, retried = case
    fault = engine.inject(make_fault())

    run = gate(engine, tmp_path / "run", **overrides)

    assert (run.outcome.exit_code, run.doc["status"], run.doc["stage"]) == (0, "pass", "done")
    assert fault.hits >= 1
    assert run.scores == clean_run.scores
    assert correct_by_doc(run) == correct_by_doc(clean_run)
    assert run.requests["failed"] == 0
    assert run.requests["completed"] == FAULT_LIMIT
    assert run.requests["retried"] == (fault.hits if retried else 0)
    assert max(eval_attempts(engine).values()) <= 3  # --max-attempts: no retry storm


@pytest.mark.usefixtures("nineteen_of_twenty")
def test_acceptance_one_of_50_requests_answered_500_once_passes_like_a_clean_run(engine, tmp_path):
    reference = gate(engine, tmp_path / "clean", limit=50)
    engine.clear()
    fault = engine.inject(Fault("error", nth={17}, times=1))  # the 16th eval request

    run = gate(engine, tmp_path / "faulty", limit=50)

    assert fault.hits == 1
    assert engine.status_counts[500] == 1
    assert (run.outcome.exit_code, run.doc["status"]) == (0, "pass")
    assert (
        run.scores
        == reference.scores
        == [
            ("strict-match", 0.96, 50),
            ("flexible-extract", 0.96, 50),
        ]
    )
    assert correct_by_doc(run) == correct_by_doc(reference)
    assert run.requests | {"retried": 1} == reference.requests | {"retried": 1}
    assert (run.requests["retried"], run.requests["failed"]) == (1, 0)


@pytest.mark.usefixtures("nineteen_of_twenty")
def test_circuits_open_while_the_router_starts_are_waited_out(engine, tmp_path, clean_run):
    fault = engine.inject(Fault("router_busy", paths={"/v1/models"}, times=3))

    run = gate(engine, tmp_path / "run", ready_timeout=10, retry_wait_min=0.02, retry_wait_max=0.05)

    assert fault.hits == 3
    assert [r.status for r in engine.log if r.path == "/v1/models"][:4] == [503, 503, 503, 200]
    assert (run.outcome.exit_code, run.doc["status"]) == (0, "pass")
    assert run.scores == clean_run.scores


@pytest.mark.usefixtures("nineteen_of_twenty")
def test_a_busy_probe_is_retried(engine, tmp_path, clean_run):
    fault = engine.inject(Fault("router_busy", nth={1}))

    run = gate(engine, tmp_path / "run")

    assert fault.hits == 1
    assert engine.requests[0].status == 503 and engine.requests[1].status == 200
    assert run.doc["probe"]["outcome"] == "ok"
    assert run.scores == clean_run.scores


# -- faults that end the run: the right code, stage and message, in bounded time -------------


def test_refused_connections_are_not_ready_within_the_ready_timeout(tmp_path):
    run = gate(refused_url(), tmp_path / "run", ready_timeout=0.5, within=10)

    assert (run.outcome.exit_code, run.doc["status"], run.doc["stage"]) == (3, "error", "readiness")
    assert "was not ready after" in run.outcome.reason
    assert "(--ready-timeout 0.5); last answer: ConnectionRefusedError" in run.outcome.reason
    assert run.elapsed < 0.5 + 3
    assert run.doc["eval"] is None


@pytest.mark.usefixtures("nineteen_of_twenty")
def test_circuits_open_for_good_is_not_ready_within_the_ready_timeout(engine, tmp_path):
    engine.inject(Fault("router_busy", paths={"/v1/models"}))

    run = gate(
        engine,
        tmp_path / "run",
        ready_timeout=0.5,
        retry_wait_min=0.02,
        retry_wait_max=0.02,
        within=10,
    )

    assert_error(run, code=3, stage="readiness", says="last answer: HTTP 503: all circuits open")
    assert run.elapsed < 0.5 + 3
    assert engine.total == 0  # no generation request was sent


def test_another_model_served_fails_at_once(tmp_path):
    with FakeEngine(EngineBehaviour(listed_model="other-model")) as other:
        run = gate(other, tmp_path / "run", ready_timeout=30)

        models = [r for r in other.log if r.path == "/v1/models"]
    assert_error(
        run,
        code=3,
        stage="readiness",
        says="does not serve model 'fake-model'; it serves ['other-model']. Pass --model",
    )
    assert len(models) == 1  # an answer, not a glitch: asked once
    assert run.elapsed < 5


@pytest.mark.usefixtures("nineteen_of_twenty")
def test_unauthorized_model_list_fails_at_once(engine, tmp_path):
    fault = engine.inject(Fault("error", status=401, paths={"/v1/models"}, message="bad key"))

    run = gate(engine, tmp_path / "run", ready_timeout=30)

    assert_error(
        run,
        code=3,
        stage="readiness",
        says="answered HTTP 401: bad key. The server refused the credentials: pass the API key "
        "it expects with --api-key, or set EVALGATE_API_KEY or OPENAI_API_KEY.",
    )
    assert fault.hits == 1


@pytest.mark.usefixtures("nineteen_of_twenty")
def test_a_rejected_probe_fails_before_the_eval(engine, tmp_path):
    engine.inject(Fault("error", status=400, nth={1}, message="max_tokens is too large"))

    run = gate(engine, tmp_path / "run")

    assert_error(run, code=3, stage="probe", says="The engine rejected the pre-flight request")
    assert "HTTP 400: max_tokens is too large" in run.outcome.reason
    assert run.doc["probe"]["status_code"] == 400
    assert run.doc["probe"]["engine_message"] == "max_tokens is too large"
    assert engine.total == 1  # the eval never started


@pytest.mark.usefixtures("nineteen_of_twenty")
def test_a_hung_probe_fails_within_its_timeout(engine, tmp_path):
    engine.inject(Fault("hang"))

    run = gate(engine, tmp_path / "run", timeout=0.3, max_attempts=2, within=15)

    assert_error(run, code=3, stage="probe", says="could not reach the engine after 2 attempts")
    assert "(no first token within 0.3 s)" in run.outcome.reason
    assert run.doc["timings"]["probe"] < 0.3 * 2 + 1.5
    # At most the two attempts; on a loaded machine the second may time out before the fake
    # engine has read it, so its count can be one.
    assert 1 <= engine.total <= 2


@pytest.mark.usefixtures("nineteen_of_twenty")
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


def test_a_trickling_answer_is_cut_at_the_timeout():
    """--timeout bounds the whole answer, not each read: a byte every 50 ms never completes."""
    import asyncio
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    stop = threading.Event()

    class Trickle(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "100000")
            self.end_headers()
            with contextlib.suppress(OSError):
                while not stop.wait(0.05):
                    self.wfile.write(b" ")
                    self.wfile.flush()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Trickle)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = eval_client(f"http://127.0.0.1:{server.server_address[1]}/v1", timeout=0.3)

    async def ask() -> RequestFailed:
        try:
            with pytest.raises(RequestFailed) as failed:
                await client.complete({"model": MODEL, "messages": []})
        finally:
            await client.close()
        return failed.value

    started = time.monotonic()
    try:
        with deadline(10):
            failure = asyncio.run(ask())
    finally:
        stop.set()
        server.shutdown()
        server.server_close()

    assert time.monotonic() - started < 0.3 * 2 + 1.5
    assert str(failure) == "no answer: request timed out (--timeout)"
    assert (failure.fatal, failure.attempts, client.retried) == (False, 2, 1)


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


# -- answers that are not answers: counted, reported, gated ------------------------------------


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


def test_the_clean_run_has_no_model_warning(clean_run):
    assert not any("came from model" in w for w in clean_run.doc["warnings"])


def test_the_choice_with_index_0_is_the_answer_whatever_its_position(tmp_path, clean_run):
    with FakeEngine(EngineBehaviour(accuracy=FAULT_ACCURACY, extra_choice_first=True)) as engine:
        run = gate(engine, tmp_path / "run")

    assert run.scores == clean_run.scores
    assert all("#### 0" not in s["response"] for s in run.samples())


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


# -- side doors: a glitch on /tokenize or the probe's stream must still leave a result ---------


@pytest.mark.usefixtures("nineteen_of_twenty")
def test_a_hung_model_list_is_not_ready_within_the_ready_timeout(engine, tmp_path):
    engine.inject(Fault("hang", paths={"/v1/models"}))

    run = gate(engine, tmp_path / "run", ready_timeout=1, within=4)

    assert_error(run, code=3, stage="readiness", says="was not ready after")


@pytest.mark.usefixtures("nineteen_of_twenty")
def test_a_reset_on_tokenize_still_leaves_a_result(engine, tmp_path):
    engine.inject(Fault("reset", paths={"/tokenize"}))

    run = gate(engine, tmp_path / "run")

    # No token counts from the engine: the cautious estimate sizes the budget, and says so.
    assert run.doc["status"] in ("pass", "fail")
    assert run.doc["context"]["prompt_tokens"]["source"].startswith("estimate")


@pytest.mark.usefixtures("nineteen_of_twenty")
def test_a_garbled_probe_stream_still_leaves_a_result(engine, tmp_path):
    engine.inject(Fault("malformed_json", nth={1}))

    run = gate(engine, tmp_path / "run")

    assert run.doc["status"] in ("pass", "error")


# -- bad input: exit 2 with a message that names the input --------------------------------------


@pytest.mark.usefixtures("nineteen_of_twenty")
def test_thresholds_missing_is_a_usage_error(engine, tmp_path, cli):
    out = tmp_path / "run"
    missing = tmp_path / "nope.json"

    code, _, err = cli(*run_args(engine.url, out, thresholds=missing, **FAULT_RUN), within=30)

    assert code == 2
    assert f"ThresholdsError: Cannot read thresholds file {missing}: " in err
    assert "Pass --thresholds with an existing file" in err
    doc = load_result(out)
    assert (doc["status"], doc["stage"], doc["exit_code"]) == ("error", "thresholds", 2)
    assert engine.log == []  # the engine was never asked anything


@pytest.mark.usefixtures("nineteen_of_twenty")
@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('{"default": {"gsm8k": 0.9}', "is not valid JSON (line 1 column 27: Expecting ','"),
        ('{"default": {"gsm8k": "0.9"}}', "$.default.gsm8k: '0.9' is not of type 'number'"),
        ('{"default": {"gsm8k": 1.5}}', "$.default.gsm8k: 1.5 is greater than the maximum of 1"),
        ("[]", "is not a valid thresholds file"),
    ],
    ids=["cut JSON", "a string threshold", "a threshold over 1", "not an object"],
)
def test_a_bad_thresholds_file_is_a_usage_error(engine, tmp_path, cli, text, says):
    path = tmp_path / "thresholds.json"
    path.write_text(text, encoding="utf-8")
    out = tmp_path / "run"

    code, _, err = cli(*run_args(engine.url, out, thresholds=path, **FAULT_RUN), within=30)

    assert code == 2
    assert "ThresholdsError: " in err and says in err
    assert "stage: thresholds" in err
    assert load_result(out)["stage"] == "thresholds"
    assert engine.log == []


@pytest.mark.usefixtures("nineteen_of_twenty")
@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('{"default": {"gsm8k": 0.99, "gsm8k": 0.1}}', "repeats the key 'gsm8k'"),
        ('{"default": {"gsm8k": 0.9}, "models": {"": {"gsm8k": 0.1}}}', "should be non-empty"),
        ('{"default": {"gsm8k": NaN}}', "$.default.gsm8k is NaN"),
    ],
    ids=["a repeated key (the last would pass)", "an empty model key", "a NaN floor"],
)
def test_an_ambiguous_thresholds_file_stops_before_anything_runs(engine, tmp_path, cli, text, says):
    path = tmp_path / "thresholds.json"
    path.write_text(text, encoding="utf-8")
    out = tmp_path / "run"

    code, stdout, err = cli(*run_args(engine.url, out, thresholds=path, **FAULT_RUN), within=30)

    assert code == 2
    assert "ThresholdsError: " in err and says in err
    assert "PASS" not in stdout and "FAIL" not in stdout
    doc = load_result(out)
    assert (doc["status"], doc["stage"], doc["exit_code"]) == ("error", "thresholds", 2)
    assert doc["eval"] is None
    assert engine.log == []


@pytest.mark.usefixtures("nineteen_of_twenty")
def test_a_binary_thresholds_file_is_a_usage_error(engine, tmp_path, cli):
    path = tmp_path / "thresholds.json"
    path.write_bytes(b'{"default": {"gsm8k": 0.9}}\xff\xfe')

    code, _, err = cli(
        *run_args(engine.url, tmp_path / "run", thresholds=path, **FAULT_RUN), within=30
    )

    assert code == 2
    assert "ThresholdsError: " in err


def _dataset_copy(folder: Path) -> Path:
    folder.mkdir()
    for split in ("test", "train"):
        shutil.copyfile(bundled_dir() / f"{split}.jsonl", folder / f"{split}.jsonl")
    return folder


def _missing_train(folder: Path) -> Path:
    _dataset_copy(folder)
    (folder / "train.jsonl").unlink()
    return folder


def _changed_byte(folder: Path) -> Path:
    _dataset_copy(folder)
    path = folder / "test.jsonl"
    data = bytearray(path.read_bytes())
    data[100] ^= 1
    path.write_bytes(bytes(data))
    return folder


def _bad_line(folder: Path) -> Path:
    _dataset_copy(folder)
    with (folder / "test.jsonl").open("a", encoding="utf-8") as handle:
        handle.write("{not json\n")
    return folder


@pytest.mark.usefixtures("nineteen_of_twenty")
@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda folder: folder, "GSM8K test split not found at"),
        (_missing_train, "GSM8K train split not found at"),
        (_changed_byte, "not the published GSM8K test split's"),
        (_bad_line, "not the published GSM8K test split's"),
    ],
    ids=["no folder", "no train split", "one changed byte", "a bad line"],
)
def test_a_bad_dataset_is_a_usage_error(engine, tmp_path, cli, make, says):
    folder = make(tmp_path / "gsm8k")
    out = tmp_path / "run"

    code, _, err = cli(*run_args(engine.url, out, dataset_dir=folder, **FAULT_RUN), within=30)

    assert code == 2
    assert "DatasetError: " in err and says in err
    assert load_result(out)["stage"] == "dataset"
    assert engine.log == []


@pytest.mark.parametrize(
    "case",
    [
        ("--limit", "0", "0", "out of range: give 1 to 2,147,483,647"),
        ("--timeout", "0", "0.0", "out of range: give more than 0 to 604,800"),
        ("--num-concurrent", "0", "0", "out of range: give 1 to 65,535"),
        ("--max-attempts", "0", "0", "out of range: give 1 to 1,000"),
        ("--max-truncated-rate", "1.5", "1.5", "out of range: give 0 to 1"),
        ("--max-failed-requests", "-1", "-1", "out of range: give 0 to 2,147,483,647"),
        ("--retry-wait-min", "-1", "-1.0", "out of range: give 0 to 604,800"),
        ("--ready-timeout", "-1", "-1.0", "out of range: give 0 to 604,800"),
        ("--isl", "-5", "-5", "out of range: give 1 to 2,147,483,647"),
    ],
    ids=lambda case: case[0],
)
def test_a_bad_setting_is_a_usage_error(tmp_path, cli, case):
    flag, value, shown, says = case
    out = tmp_path / "run"

    code, _, err = cli(*run_args(refused_url(), out, **FAULT_RUN), flag, value, within=30)

    assert code == 2
    assert f"UsageError: Invalid settings: {flag} = {shown} (set by {flag} or " in err
    assert f"): {says}." in err
    assert not out.exists()  # settings come before the output folder: nothing to write into


@pytest.mark.parametrize(
    "case",
    [
        ("EVALGATE_LIMIT", "abc", "--limit", "not a whole number in ASCII digits 0-9"),
        ("EVALGATE_TIMEOUT", "soon", "--timeout", "not a decimal number in ASCII digits 0-9"),
        ("EVALGATE_API", "grpc", "--api", "Input should be 'chat' or 'completions'"),
    ],
    ids=lambda case: case[0],
)
def test_a_bad_environment_variable_is_a_usage_error(tmp_path, cli, monkeypatch, case):
    variable, value, flag, says = case
    monkeypatch.setenv(variable, value)

    code, _, err = cli("run", "--output-dir", str(tmp_path / "run"), within=30)

    assert code == 2
    assert f"UsageError: Invalid settings: {flag} = {value!r} (set by {flag} or " in err
    assert variable in err
    assert says in err


def test_a_flag_of_the_wrong_type_is_a_usage_error(tmp_path, cli):
    code, _, err = cli(
        *run_args(refused_url(), tmp_path / "run", **FAULT_RUN), "--limit", "ten", within=30
    )

    assert code == 2  # read by the same rule as its variable (evalgate.numbers)
    assert "--limit = 'ten' (set by --limit or EVALGATE_LIMIT or EVAL_LIMIT): not a whole" in err


def test_a_length_flag_that_is_not_a_token_count_names_the_forms_it_takes(tmp_path, cli):
    code, _, err = cli(
        *run_args(refused_url(), tmp_path / "run", **FAULT_RUN), "--isl", "8x", within=30
    )

    assert code == 2
    assert "--isl = '8x' (set by --isl or EVALGATE_ISL or ISL): not a whole number of tokens" in err
    assert "write e.g. 8192, 8k (8000) or 8K (8192)" in err


def test_missing_endpoint_settings_are_named(tmp_path, cli):
    out = tmp_path / "run"

    code, _, err = cli("run", "--isl", "1024", "--osl", "1024", "--output-dir", str(out), within=30)

    assert code == 2
    assert "UsageError: Missing --base-url, --model: set the flag(s)" in err
    assert load_result(out)["stage"] == "settings"


@pytest.mark.usefixtures("nineteen_of_twenty")
def test_an_output_folder_that_cannot_be_created_is_a_usage_error(engine, tmp_path, cli):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder", encoding="utf-8")

    code, _, err = cli(*run_args(engine.url, blocker / "run", **FAULT_RUN), within=30)

    assert code == 2
    assert f"ArtifactError: Cannot create the output folder {blocker / 'run'}: " in err
    assert engine.log == []


BAD_URLS = [
    ("notaurl", "no scheme"),
    ("ftp://127.0.0.1:8000/v1", "not http(s)"),
    ("http://", "no host"),
    ("127.0.0.1:8000/v1", "host without scheme"),
    ("http://127.0.0.1:99999/v1", "port out of range"),
    ("http://127.0.0.1:8000/v1?x=1", "a query"),
    ("http://127.0.0.1:8000/v1#models", "a fragment"),
]


@pytest.mark.parametrize("url", [u for u, _ in BAD_URLS], ids=[why for _, why in BAD_URLS])
def test_a_malformed_base_url_is_a_usage_error(tmp_path, cli, url):
    out = tmp_path / "run"

    code, _, err = cli(*run_args(url, out, **FAULT_RUN), "--ready-timeout", "0.2", within=10)

    assert code == 2
    assert "--base-url" in err


@pytest.mark.usefixtures("nineteen_of_twenty")
def test_a_malformed_worker_url_is_a_usage_error(engine, tmp_path, cli):
    code, _, err = cli(
        *run_args(engine.url, tmp_path / "run", **FAULT_RUN),
        "--worker-url",
        "decode:8000/v1",
        within=30,
    )

    assert code == 2
    assert "--worker-url" in err


def test_a_url_with_a_query_names_what_to_drop(tmp_path, cli):
    code, _, err = cli(
        *run_args("http://127.0.0.1:8000/v1?x=1", tmp_path / "run", **FAULT_RUN), within=30
    )

    assert code == 2
    assert "'http://127.0.0.1:8000/v1?x=1' has a query or fragment (?x=1)" in err


@pytest.mark.usefixtures("nineteen_of_twenty")
def test_https_against_a_plain_http_engine_fails_at_once(engine, tmp_path):
    url = f"https://127.0.0.1:{engine.port}/v1"

    run = gate(url, tmp_path / "run", ready_timeout=30, within=15)

    assert_error(run, code=3, stage="readiness", says="did not answer TLS")
    assert f"try http://127.0.0.1:{engine.port}/v1" in run.outcome.reason
    assert run.elapsed < 10  # not retried until --ready-timeout


@pytest.mark.usefixtures("nineteen_of_twenty")
def test_a_base_url_without_v1_gets_the_hint_to_add_it(engine, tmp_path):
    run = gate(engine.root_url, tmp_path / "run", ready_timeout=30, within=15)

    assert_error(run, code=3, stage="readiness", says="HTTP 404")
    assert f"--base-url does not end in /v1: try {engine.root_url}/v1" in run.outcome.reason


class _Redirect(http.server.BaseHTTPRequestHandler):
    target = ""

    def do_GET(self) -> None:
        self.send_response(302)
        self.send_header("Location", self.target + self.path)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.mark.usefixtures("nineteen_of_twenty")
def test_a_redirect_names_where_it_points(engine, tmp_path):
    _Redirect.target = engine.root_url
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Redirect)
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        run = gate(url, tmp_path / "run", ready_timeout=30, within=15)
    finally:
        server.shutdown()
        server.server_close()

    assert_error(run, code=3, stage="readiness", says="HTTP 302")
    assert f"redirects to {engine.url}/models" in run.outcome.reason
    assert "empty body" not in run.outcome.reason


# -- a worker behind the router goes away ------------------------------------------------------


@pytest.mark.parametrize("router", ["vllm-router", "sglang-router"])
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


@pytest.mark.usefixtures("nineteen_of_twenty")
def test_a_probe_busy_on_every_attempt_is_no_verdict_on_the_budget(engine, tmp_path):
    engine.inject(Fault("router_busy"))

    run = gate(engine, tmp_path / "run")

    assert_error(
        run,
        code=3,
        stage="probe",
        says="The engine did not answer the pre-flight request after 3 attempts "
        "(HTTP 503: all circuits open).",
    )
    assert "rejected" not in run.outcome.reason and "--max-tokens" not in run.outcome.reason
    assert run.doc["probe"]["status_code"] == 503
    assert engine.total == 3  # --max-attempts, then no eval
