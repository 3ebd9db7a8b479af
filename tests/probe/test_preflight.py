"""gate.probe: the change the probe suggests when the engine rejects it."""

from __future__ import annotations

import json

import pytest

from evalgate.context.budget import EvalContext
from evalgate.engine.wire import EngineError
from evalgate.evidence.model import Limit
from evalgate.probe.preflight import suggest_fix
from tests.conftest import (
    THINKING_FIELDS,
    assert_error,
    gate,
    load_result,
    run_args,
)
from tests.fakeengine import CHAT_PATH, EngineBehaviour, FakeEngine, Fault
from tests.front import (
    FRONT_RUN,
    Front,
    json_answer,
    streamed_only,
    timed,
)

VLLM_MAX_TOKENS = (
    "max_tokens=1500 cannot be greater than max_model_len=1024. Please request fewer output "
    "tokens. (parameter=max_tokens, value=1500)"
)


VLLM_PROMPT = (
    "This model's maximum context length is 1024 tokens. However, your prompt contains at least "
    "1025 input tokens, which exceeds this limit even without any output tokens."
)


SGLANG_TOTAL = (
    "Requested token count exceeds the model's maximum context length of 1024 tokens. You "
    "requested a total of 2700 tokens: 1200 tokens from the input messages and 1500 tokens for "
    "the completion."
)


SGLANG_INPUT = "The input (1200 tokens) is longer than the model's context length (1024 tokens)."


ROUTER_CARD = Limit(2048, "/v1/models of the endpoint")


def context(*, served=(ROUTER_CARD,), policy="fit", max_tokens=848, prompt=1200) -> EvalContext:
    return EvalContext(
        eval_max_model_len=2048,
        max_tokens=max_tokens,
        budget_policy=policy,
        native=None,
        served=tuple(served),
        requested=2304,
        prompt_tokens=Limit(prompt, "/tokenize") if prompt is not None else None,
        steps=(),
    )


WORKER_SERVES_LESS = (
    "The engine enforces 1024 tokens, but evalgate was told the served limit is 2048 "
    "(/v1/models of the endpoint): a worker behind the router (often the decode) serves less. "
    "Pass each worker with --worker-url, its server arguments with --server-config, or "
    "--served-max-model-len 1024."
)


GENERIC = (
    "Serve a larger --max-model-len, or lower the budget with --max-tokens; --explain on "
    "`evalgate context` shows each number and its source."
)


FIXES = [
    # (case, engine's message, context, the suggestion)
    ("vLLM max_tokens, a worker serves less", VLLM_MAX_TOKENS, context(), WORKER_SERVES_LESS),
    ("vLLM prompt too long, a worker serves less", VLLM_PROMPT, context(), WORKER_SERVES_LESS),
    ("SGLang total, a worker serves less", SGLANG_TOTAL, context(), WORKER_SERVES_LESS),
    ("SGLang input, a worker serves less", SGLANG_INPUT, context(), WORKER_SERVES_LESS),
    (
        "no served limit known",
        VLLM_MAX_TOKENS,
        context(served=()),
        WORKER_SERVES_LESS.replace("2048 (/v1/models of the endpoint)", "unknown"),
    ),
    (
        "the engine enforces what evalgate knew, a forced budget",
        VLLM_MAX_TOKENS.replace("1024", "2048"),
        context(policy="forced", max_tokens=12288),
        "Drop --max-tokens 12288 to let evalgate derive the budget (about 848 here), or serve a "
        "--max-model-len of at least 13488.",
    ),
    (
        "a forced budget, prompt not measured",
        "too many tokens",
        context(policy="forced", max_tokens=4096, prompt=None),
        "Drop --max-tokens 4096 to let evalgate derive the budget (about 2048 here), or serve a "
        "--max-model-len of at least 4096.",
    ),
    ("no limit in the message, fit policy", "Bad Request", context(), GENERIC),
    (
        "the engine's limit above what evalgate knew",
        VLLM_MAX_TOKENS.replace("1024", "4096"),
        context(),
        GENERIC,
    ),
]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("message", "derived", "suggestion"), [c[1:] for c in FIXES], ids=[c[0] for c in FIXES]
)
def test_suggest_fix(message, derived, suggestion):
    assert suggest_fix(EngineError(400, message), derived) == suggestion


@pytest.mark.loopback
def test_probe_json_prints_the_error_document_on_exit_3():
    """`probe --json` printed nothing on exit 3, where `run --json` prints its error document."""
    import json

    from tests.conftest import run_args, run_subprocess
    from tests.fakeengine import EngineBehaviour, FakeEngine, Fault

    with FakeEngine(EngineBehaviour(max_model_len=4096)) as engine:
        engine.inject(Fault("error", status=400, nth={1}, message="max_tokens is too large"))
        done = run_subprocess(*run_args(engine.url, command="probe", json="-"))

    assert done.returncode == 3, done.stderr
    document = json.loads(done.stdout)
    assert (document["outcome"], document["exit_code"]) == ("error", 3)
    assert document["error"]["type"] == "ProbeError"
    assert "The engine rejected the pre-flight request" in document["error"]["message"]
    assert "ProbeError: The engine rejected the pre-flight request" in done.stderr


# Reasoning models: the thinking kept, answers cut while thinking counted, and the request options
# that steer thinking sent in every request.


@pytest.mark.loopback
@THINKING_FIELDS
def test_the_probe_accepts_a_stream_that_only_thinks(cli, field):
    """Every answer runs out of budget while thinking: the probe's stream carries reasoning
    deltas only, and is still the engine accepting the request."""
    behaviour = EngineBehaviour(thinking=field, endless_thinking=1.0)
    with FakeEngine(behaviour) as engine:
        result = cli(*run_args(engine.url, command="probe", limit=5, json="-"))
    assert result.code == 0, result.text
    outcome = json.loads(result.out)
    assert outcome["outcome"] == "ok"
    [probe] = engine.requests
    assert (probe.path, probe.status, probe.stream) == (CHAT_PATH, 200, True)
    assert probe.body is not None and probe.body["max_tokens"] == outcome["max_tokens"]
    assert probe.finish_reason == "length"  # what the engine was streaming: thinking only


# The probe keeps the engine's words: a 200 answer holding a JSON error (tests/front.py's Front).


WORDS = (
    "This model's maximum context length is 2048 tokens. However, you requested 4000 tokens "
    "(1200 in the messages, 2800 in the completion). Please reduce the length."
)


@pytest.mark.loopback
def test_a_200_json_error_to_the_probe_keeps_the_engines_words(engine, cli, tmp_path):
    error = {"error": {"message": WORDS, "type": "BadRequestError", "param": None, "code": 400}}
    with Front(engine.root_url, {CHAT_PATH: streamed_only(json_answer(200, error))}) as front:
        result, _ = timed(cli, front, *run_args(front.url, tmp_path / "run", **FRONT_RUN))

    assert result.code == 3, result.err
    assert "answered the pre-flight request with an error instead of a stream" in result.err
    assert f"(HTTP 200: {WORDS})" in result.err
    probe = load_result(tmp_path / "run")["probe"]
    assert (probe["status_code"], probe["engine_message"]) == (200, WORDS)


# Faults at the pre-flight probe: busy retried, rejected at once, hung bounded by --timeout.


@pytest.mark.usefixtures("nineteen_of_twenty")
@pytest.mark.loopback
def test_a_busy_probe_is_retried(engine, tmp_path, clean_run):
    fault = engine.inject(Fault("router_busy", nth={1}))

    run = gate(engine, tmp_path / "run")

    assert fault.hits == 1
    assert engine.requests[0].status == 503 and engine.requests[1].status == 200
    assert run.doc["probe"]["outcome"] == "ok"
    assert run.scores == clean_run.scores


@pytest.mark.usefixtures("nineteen_of_twenty")
@pytest.mark.loopback
def test_a_rejected_probe_fails_before_the_eval(engine, tmp_path):
    engine.inject(Fault("error", status=400, nth={1}, message="max_tokens is too large"))

    run = gate(engine, tmp_path / "run")

    assert_error(run, code=3, stage="probe", says="The engine rejected the pre-flight request")
    assert "HTTP 400: max_tokens is too large" in run.outcome.reason
    assert run.doc["probe"]["status_code"] == 400
    assert run.doc["probe"]["engine_message"] == "max_tokens is too large"
    assert engine.total == 1  # the eval never started


@pytest.mark.usefixtures("nineteen_of_twenty")
@pytest.mark.loopback
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
@pytest.mark.loopback
def test_a_garbled_probe_stream_still_leaves_a_result(engine, tmp_path):
    engine.inject(Fault("malformed_json", nth={1}))

    run = gate(engine, tmp_path / "run")

    assert run.doc["status"] in ("pass", "error")


@pytest.mark.usefixtures("nineteen_of_twenty")
@pytest.mark.loopback
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
