"""NVIDIA Dynamo's frontend: its answers decoded (engine.dynamo), and evalgate in front of it.

The pure decoding is checked with tables; the rest drives `evalgate` as a user would (cli.main)
against the fake engine answering in the shapes ai-dynamo 1.6.1's frontend was seen to answer in
front of vLLM on the engine stack (docs/harness.md): `context_window` on /v1/models, no model
listed until a worker registers, /v1/models/{id}/ready, flat errors, a rejection streamed as
HTTP 200 then an error event, and a dead worker's 503 then 404 with an empty body.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import pytest

from evalgate.engine import answers
from evalgate.engine.discovery import model_card
from evalgate.engine.wire import MAX_MESSAGE_CHARS, EngineError, parse_error
from evalgate.scrub import capped
from tests.conftest import (
    FAULT_ACCURACY,
    MODEL,
    deadline,
    gate,
    load_result,
    load_samples,
    run_args,
)
from tests.fakeengine import (
    CHAT_PATH,
    DYNAMO_NOT_READY,
    NOT_PROBE,
    EngineBehaviour,
    FakeEngine,
    Fault,
)
from tests.front import (
    FRONT_RUN,
    Front,
    only,
    timed,
)

pytestmark = pytest.mark.loopback


SERVED = 2048


CONFIG_LENGTH = 8192  # what Dynamo lists when the worker registers no length


GENERATION = frozenset({"/v1/chat/completions", "/v1/completions"})


ENGINE_WORDS = (
    "max_tokens=12288 cannot be greater than max_model_len=2048. Please request fewer output "
    "tokens. (parameter=max_tokens, value=12288)"
)


def frontend(**changes: object) -> FakeEngine:
    """The fake engine behind Dynamo's frontend: it serves 2048, the frontend lists 8192."""
    behaviour = EngineBehaviour(
        router="dynamo", max_model_len=SERVED, context_window=CONFIG_LENGTH, accuracy=0.9
    )
    for name, value in changes.items():
        setattr(behaviour, name, value)
    return FakeEngine(behaviour)


CONTEXT = {"command": "context", "osl": 1024, "limit": 5}


RUN = {"osl": 1024, "limit": 5, "num_concurrent": 2, "min_samples": 0, "max_attempts": 3}


def model_config(folder: Path) -> Path:
    """A config.json whose max_position_embeddings is the 8192 Dynamo lists."""
    path = folder / "config.json"
    path.write_text(json.dumps({"model_type": "llama", "max_position_embeddings": CONFIG_LENGTH}))
    return path


def generation_bodies(engine: FakeEngine) -> list[dict[str, object]]:
    return [r.body for r in engine.log if r.path in GENERATION and r.body is not None]


@pytest.mark.parametrize(
    ("card", "window"),
    [
        ({"id": "m", "context_window": 8192}, 8192),
        ({"id": "m", "context_window": "8192"}, None),
        ({"id": "m", "context_window": True}, None),
        ({"id": "m", "context_window": 0}, None),
        ({"id": "m", "max_model_len": 2048}, None),
    ],
)
def test_context_window(card, window):
    assert model_card(card).context_window == window


READY = [
    # (case, status, body, decoded)
    ("ready", 200, '{"model":"m","ready":true,"namespaces":{}}', ("ready", "HTTP 200")),
    (
        "no live worker",
        503,
        '{"model":"m","ready":false,"reason":"missing worker types: aggregated"}',
        ("not ready", "missing worker types: aggregated"),
    ),
    (
        "no such model",
        404,
        '{"message":"Model not found","type":"Not Found","code":404}',
        ("unlisted", "Model not found"),
    ),
    (
        "a reason too long to quote whole",
        503,
        json.dumps({"ready": False, "reason": "x" * 5000}),
        ("not ready", capped("x" * 5000, MAX_MESSAGE_CHARS)),
    ),
    ("vLLM has no such route", 404, '{"detail":"Not Found"}', None),
    ("sglang-router has none", 404, "", None),
    ("not an object", 200, "[true]", None),
    ("ready is no boolean", 200, '{"ready":"yes"}', None),
]


@pytest.mark.parametrize(
    ("status", "body", "decoded"), [c[1:] for c in READY], ids=[c[0] for c in READY]
)
def test_ready_answer(status, body, decoded):
    assert answers.ready_answer(status, body) == decoded


STREAMED = [
    # (case, event, status that decides)
    ("Dynamo's 400", {"error": {"message": "Invalid request", "code": 400}}, 400),
    ("a 500", {"error": {"message": "Internal server error", "code": 500}}, 500),
    ("no code", {"error": {"message": "oops"}}, 200),
    ("a string code", {"error": {"message": "too long", "code": "context_length_exceeded"}}, 200),
    ("a boolean code", {"error": {"message": "oops", "code": True}}, 200),
    ("a plain string", {"error": "oops"}, 200),
]


@pytest.mark.parametrize(
    ("event", "status"), [c[1:] for c in STREAMED], ids=[c[0] for c in STREAMED]
)
def test_a_streamed_error_counts_with_its_own_code(event, status):
    error = answers.stream_error(event, json.dumps(event), 200)
    assert error.status == status
    inner = event["error"]
    assert error.message == (inner["message"] if isinstance(inner, dict) else inner)


@pytest.mark.parametrize(
    ("error", "wordless"),
    [
        (parse_error(400, '{"message":"Bad Request","type":"Bad Request","code":400}'), True),
        (EngineError(400, "Invalid request"), True),
        (EngineError(400, ENGINE_WORDS, type="Bad Request"), False),
        (EngineError(500, "Bad Request"), False),  # not a rejection
    ],
)
def test_wordless(error, wordless):
    assert answers.wordless(error) is wordless


GONE = [
    # (case, status, body, clause or None)
    (
        "the model dropped",
        404,
        "",
        "Dynamo's frontend no longer lists the model (HTTP 404 with an empty body)",
    ),
    ("an unknown model", 404, '{"message":"Model not found","type":"Not Found","code":404}', None),
    (
        "a dead worker's instance",
        503,
        '{"message":"Service temporarily unavailable","type":"Service Unavailable","code":503}',
        "Dynamo's frontend cannot reach the model's worker (HTTP 503: Service temporarily "
        "unavailable)",
    ),
    (
        "no live worker",
        503,
        json.dumps(
            {
                "message": DYNAMO_NOT_READY.format(model="m"),
                "type": "Service Unavailable",
                "code": 503,
            }
        ),
        "Dynamo's frontend has no live worker for the model (HTTP 503: "
        + DYNAMO_NOT_READY.format(model="m")
        + ")",
    ),
    ("vllm-router's circuits", 503, "all circuits open", None),
    ("a 503 of another server", 503, '{"message":"Service temporarily unavailable"}', None),
]


@pytest.mark.parametrize(
    ("status", "body", "clause"), [c[1:] for c in GONE], ids=[c[0] for c in GONE]
)
def test_worker_gone(status, body, clause):
    assert answers.worker_gone(parse_error(status, body)) == clause


def test_readiness_waits_for_dynamos_worker_to_register(cli):
    with frontend(workers_ready=False) as engine:

        def register() -> None:  # the worker comes up after a few checks
            if engine.wait_until(lambda e: sum(r.path.endswith("/ready") for r in e.log) >= 3):
                engine.behaviour.workers_ready = True

        threading.Thread(target=register, daemon=True).start()
        with deadline(30, engine):
            done = cli(*run_args(engine.url, json="-", served_max_model_len=2048, **CONTEXT))
        checks = [r.status for r in engine.log if r.path == f"/v1/models/{MODEL}/ready"]

    assert done.code == 0, done.err
    assert checks[:3] == [503, 503, 503] and checks[-1] == 200
    assert f"{engine.url} is ready" in done.err
    assert "does not name the model" not in done.err  # an empty list is no placeholder here
    assert json.loads(done.out)["eval_max_model_len"] == 2048


def test_a_frontend_whose_worker_never_registers_is_not_ready(cli):
    with frontend(model_dropped=True) as engine, deadline(30, engine):
        done = cli(*run_args(engine.url, served_max_model_len=2048, **CONTEXT))

    assert done.code == 3, done.err
    line = next(x for x in done.err.splitlines() if x.startswith("NotReadyError: "))
    assert line.startswith(f"NotReadyError: {engine.url} was not ready after ")
    assert (
        f"last answer: Dynamo's frontend lists no model yet (/v1/models/{MODEL}/ready: 404 "
        "Model not found): no worker has registered one." in line
    )


def test_another_model_behind_dynamo_fails_at_once(cli):
    with frontend() as engine, deadline(30, engine):
        done = cli(*run_args(engine.url, served_max_model_len=2048, model="other", **CONTEXT))

    assert done.code == 3
    assert f"does not serve model 'other'; it serves ['{MODEL}']" in done.err


NOTE = (
    f"/v1/models of the endpoint lists context_window {CONFIG_LENGTH} for {MODEL} (Dynamo's "
    "frontend): not read as a served limit, because Dynamo lists the model config's "
    "max_position_embeddings there when its worker registers no length; the served limit must "
    "come from --worker-url, --server-config or --served-max-model-len"
)


def test_context_window_alone_is_no_served_limit_and_says_so(cli):
    with frontend() as engine, deadline(30, engine):
        done = cli(*run_args(engine.url, **CONTEXT))

    assert done.code == 2
    assert NOTE in done.err  # logged before the error
    assert "ContextError: Cannot derive EVAL_MAX_MODEL_LEN" in done.err


def test_context_window_is_recorded_as_a_warning_beside_the_native_maximum(cli, tmp_path):
    with frontend() as engine, deadline(30, engine):
        done = cli(*run_args(engine.url, json="-", model_config=model_config(tmp_path), **CONTEXT))

    assert done.code == 0, done.err
    document = json.loads(done.out)
    assert document["served"] == []
    assert document["eval_max_model_len"] == 2304  # ISL + OSL + margin, under the native 8192
    assert NOTE in document["warnings"]


def test_a_worker_url_gives_the_served_limit_and_no_warning(cli):
    with (
        frontend() as engine,
        FakeEngine(EngineBehaviour(max_model_len=SERVED)) as worker,
        deadline(30, engine),
    ):
        done = cli(*run_args(engine.url, json="-", worker_url=worker.url, **CONTEXT))

    assert done.code == 0, done.err
    document = json.loads(done.out)
    assert document["served"] == [{"value": 2048, "source": f"/v1/models of worker {worker.url}"}]
    assert document["eval_max_model_len"] == 2048
    assert not any("context_window" in w for w in document["warnings"])
    assert "context_window" not in done.err


def test_an_overstated_context_window_never_reaches_the_eval(cli, tmp_path):
    """Dynamo lists 8192 where the engine serves 2048: with only the model's config, the budget
    the config allows fails at the probe, before any eval request, with the engine's words."""
    out = tmp_path / "run"
    config = str(model_config(tmp_path))
    with frontend() as engine, deadline(30, engine):
        done = cli(
            *run_args(engine.url, out, "--osl", "4096", isl=4096, model_config=config, **RUN)
        )
        bodies = generation_bodies(engine)

    assert done.code == 3, done.err
    document = load_result(out)
    assert (document["status"], document["stage"]) == ("error", "probe")
    budget = document["context"]["max_tokens"]
    assert budget > SERVED
    words = (
        f"max_tokens={budget} cannot be greater than max_model_len=2048. Please request fewer "
        f"output tokens. (parameter=max_tokens, value={budget})"
    )
    assert document["probe"] | {"status_code": 400, "engine_message": words} == document["probe"]
    assert document["reason"].startswith(
        f"The engine rejected the pre-flight request (HTTP 400: {words})."
    )
    assert "--served-max-model-len 2048" in document["reason"]
    assert len(bodies) == 1 and bodies[0]["stream"] is True  # the probe, once: a 400 is an answer
    assert NOTE in document["warnings"]


def test_behind_dynamo_a_run_with_the_workers_limit_stays_within_it(cli, tmp_path):
    out = tmp_path / "run"
    with (
        frontend() as engine,
        FakeEngine(EngineBehaviour(max_model_len=SERVED)) as worker,
        deadline(60, engine),
    ):
        done = cli(*run_args(engine.url, out, worker_url=worker.url, **RUN))
        bodies = generation_bodies(engine)

    assert done.code == 0, done.err
    document = load_result(out)
    assert document["context"]["eval_max_model_len"] == 2048
    assert document["eval"]["requests"]["completed"] == 5
    assert {body["max_tokens"] for body in bodies} == {document["eval"]["max_tokens"]}
    assert document["eval"]["max_tokens"] < SERVED
    assert document["endpoint"]["engine"]["owned_by"] == "nvidia"


def test_a_rejected_budget_through_dynamo_fails_at_the_probe_with_the_engines_words(cli, tmp_path):
    out = tmp_path / "run"
    with frontend() as engine, deadline(30, engine):
        done = cli(*run_args(engine.url, out, served_max_model_len=2048, max_tokens=12288, **RUN))
        bodies = generation_bodies(engine)

    assert done.code == 3, done.err
    document = load_result(out)
    assert document["probe"]["status_code"] == 400
    assert document["probe"]["engine_message"] == ENGINE_WORDS
    reason = document["reason"]
    assert reason.startswith(
        f"The engine rejected the pre-flight request (HTTP 400: {ENGINE_WORDS})."
    )
    assert "Drop --max-tokens 12288 to let evalgate derive the budget" in reason
    assert "did not answer" not in reason  # an error event is an answer, not a malformed stream
    assert len(bodies) == 1
    assert f"ProbeError: {reason}" in done.err


def test_a_rejection_without_the_engines_words_says_where_they_are(cli, tmp_path):
    out = tmp_path / "run"
    with frontend(dynamo_words=False) as engine, deadline(30, engine):
        done = cli(*run_args(engine.url, out, served_max_model_len=2048, max_tokens=12288, **RUN))

    assert done.code == 3, done.err
    document = load_result(out)
    reason = document["reason"]
    assert reason.startswith(
        "The engine rejected the pre-flight request (HTTP 400: Invalid request)."
    )
    assert reason.endswith(f" {answers.NO_WORDS} {answers.ASK_WORKERS}")
    assert document["probe"]["engine_message"] == "Invalid request"


def test_given_a_worker_url_evalgate_asks_the_worker_for_its_words(cli, tmp_path):
    out = tmp_path / "run"
    with (
        frontend(dynamo_words=False) as engine,
        FakeEngine(EngineBehaviour(max_model_len=SERVED)) as worker,
        deadline(30, engine),
    ):
        done = cli(*run_args(engine.url, out, worker_url=worker.url, max_tokens=12288, **RUN))
        asked = generation_bodies(worker)

    assert done.code == 3, done.err
    document = load_result(out)
    reason = document["reason"]
    assert reason.startswith(
        "The engine rejected the pre-flight request (HTTP 400: Invalid request)."
    )
    assert reason.endswith(
        f" The worker {worker.url} answers the same request itself: HTTP 400: {ENGINE_WORDS}."
    )
    assert document["probe"]["engine_message"] == ENGINE_WORDS
    assert len(asked) == 1 and asked[0]["max_tokens"] == 12288  # the same request, once


def test_a_worker_that_accepts_what_the_frontend_rejected_is_said_so(cli, tmp_path):
    out = tmp_path / "run"
    with (
        frontend(dynamo_words=False, max_model_len=1024) as engine,  # the frontend's own limit
        FakeEngine(EngineBehaviour(max_model_len=SERVED)) as worker,
        deadline(30, engine),
    ):
        done = cli(*run_args(engine.url, out, worker_url=worker.url, max_tokens=1500, **RUN))

    assert done.code == 3, done.err
    reason = load_result(out)["reason"]
    assert reason.endswith(
        f" The worker {worker.url} accepts the same request itself: the rejection is the "
        "frontend's own; its log says why."
    )


def test_a_model_dropped_mid_eval_names_the_worker_that_went_away(cli, tmp_path):
    out = tmp_path / "run"
    with frontend() as engine, deadline(30, engine):
        engine.inject(Fault("worker_gone", nth=NOT_PROBE))
        done = cli(*run_args(engine.url, out, served_max_model_len=2048, **RUN))

    assert done.code == 4, done.err
    document = load_result(out)
    reason = document["reason"]
    assert re.fullmatch(
        r"Dynamo's frontend no longer lists the model \(HTTP 404 with an empty body\): its worker "
        r"went away during the eval, at question \d\. Restart the worker \(its log says why it "
        r"stopped\) and run the eval again\.",
        reason,
    ), reason
    assert "rejected" not in reason and "unusual" not in reason
    assert f"EvalFailedError: {reason}" in done.err


@pytest.mark.parametrize(
    ("message", "clause"),
    [
        (
            None,
            "Dynamo's frontend cannot reach the model's worker (HTTP 503: Service temporarily "
            "unavailable)",
        ),
        (
            DYNAMO_NOT_READY.format(model=MODEL),
            "Dynamo's frontend has no live worker for the model (HTTP 503: "
            + DYNAMO_NOT_READY.format(model=MODEL)
            + ")",
        ),
    ],
    ids=["unreachable", "not ready"],
)
def test_a_worker_gone_mid_eval_is_named_when_the_retries_run_out(cli, tmp_path, message, clause):
    out = tmp_path / "run"
    with frontend() as engine, deadline(30, engine):
        engine.inject(Fault("router_busy", nth=NOT_PROBE, message=message))
        done = cli(*run_args(engine.url, out, served_max_model_len=2048, **RUN))

    assert done.code == 4, done.err
    reason = load_result(out)["reason"]
    assert reason.startswith(f"{clause}: its worker went away during the eval. "), reason
    assert re.search(r"\d+ request\(s\) failed after 3 attempt\(s\) each", reason)
    failed = [s for s in load_samples(out) if s["error"]]
    assert failed and all(s["error"].startswith("HTTP 503: ") for s in failed)


def test_the_503s_then_the_404_of_a_dead_worker_end_the_eval_naming_it(cli, tmp_path):
    """As seen: 503 for a while, then 404 with an empty body once the frontend dropped the model."""
    out = tmp_path / "run"
    with frontend() as engine, deadline(30, engine):
        engine.inject(Fault("router_busy", nth=frozenset({2, 3})))
        engine.inject(Fault("worker_gone", nth=NOT_PROBE))
        done = cli(*run_args(engine.url, out, served_max_model_len=2048, **RUN))

    assert done.code == 4, done.err
    reason = load_result(out)["reason"]
    assert reason.startswith(
        "Dynamo's frontend no longer lists the model (HTTP 404 with an empty body): its worker "
        "went away during the eval"
    ), reason


# Every number an engine sends is typed where it enters: an implausible one in an answer is named
# and not used (the fake engine behind tests/front.py's Front, which rewrites its answers).


@pytest.mark.parametrize("tokens", [-3, True, "7"], ids=["negative", "true", "text"])
def test_implausible_numbers_in_answers_are_named_and_not_used(engine, cli, tmp_path, tokens):
    def usage(doc):
        return {**doc, "usage": {**doc["usage"], "completion_tokens": tokens}}

    with Front(engine.root_url, rewrite=only(CHAT_PATH, usage)) as front:
        result, _ = timed(cli, front, *run_args(front.url, tmp_path / "run", **FRONT_RUN))

    assert result.code == 0, result.err
    samples = load_samples(tmp_path / "run")
    assert [s["completion_tokens"] for s in samples] == [None] * 5
    warning = f"5 answer(s) carried an implausible usage.completion_tokens (first: {tokens!r})"
    assert any(warning in w for w in load_result(tmp_path / "run")["warnings"])


# The choice with index 0 is the answer, wherever it stands among the choices.


def test_the_choice_with_index_0_is_the_answer_whatever_its_position(tmp_path, clean_run):
    with FakeEngine(EngineBehaviour(accuracy=FAULT_ACCURACY, extra_choice_first=True)) as engine:
        run = gate(engine, tmp_path / "run")

    assert run.scores == clean_run.scores
    assert all("#### 0" not in s["response"] for s in run.samples())
