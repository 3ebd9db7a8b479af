"""engine.wire: every engine's error body, reduced to the engine's words and a retry decision.

The bodies are the ones REFERENCE.md §1 records for vLLM 0.32 (seen), newer and older vLLM,
SGLang, FastAPI and vllm-router.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from evalgate.engine.answers import parse_answer
from evalgate.engine.wire import MAX_MESSAGE_CHARS, EngineError, credentials_advice, parse_error
from evalgate.errors import (
    MalformedAnswer,
)
from tests.conftest import QUICK, json_scalars, json_values

pytestmark = pytest.mark.unit


VLLM_MAX_TOKENS = (
    "max_tokens=12288 cannot be greater than max_model_len=2048. Please request fewer output "
    "tokens. (parameter=max_tokens, value=12288)"
)


VLLM_PROMPT = (
    "This model's maximum context length is 2048 tokens. However, your prompt contains at least "
    "2049 input tokens, which exceeds this limit even without any output tokens. Please reduce "
    "the length of the input prompt. (parameter=input_tokens, value=2049)"
)


OLD_VLLM = (
    "This model's maximum context length is 9472 tokens. However, you requested 13000 tokens "
    "(712 in the messages, 12288 in the completion). Please reduce the length of the messages "
    "or completion."
)


SGLANG = (
    "Requested token count exceeds the model's maximum context length of 9472 tokens. You "
    "requested a total of 13000 tokens: 712 tokens from the input messages and 12288 tokens "
    "for the completion. Please reduce the number of tokens in the input messages or the "
    "completion to fit within the limit."
)


DECODE_MAX_TOKENS = (
    "max_tokens=1500 cannot be greater than max_model_len=1024. Please request fewer output "
    "tokens. (parameter=max_tokens, value=1500)"
)


def nested(message: str, code: int | str, param: str | None = None) -> str:
    return json.dumps(
        {"error": {"message": message, "type": "BadRequestError", "param": param, "code": code}}
    )


def flat(message: str) -> str:
    return json.dumps(
        {
            "object": "error",
            "message": message,
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        }
    )


def want(message, type_=None, code=None, param=None, wrapped=None, *, retry=False):
    """What the user sees of one parsed error."""
    return {
        "message": message,
        "type": type_,
        "code": code,
        "param": param,
        "wrapped_status": wrapped,
        "retryable": retry,
    }


BAD_REQUEST = "BadRequestError"


NOT_FOUND = "The model `dsr1` does not exist. Valid aliases: ['deepseek-r1']"


VALIDATION = [{"loc": ["body", "max_tokens"], "msg": "Input should be greater than 0"}]


ROUTER_WRAP = "Request processing failed: Prefill server error {} {}: "


BODIES = [
    # (case, status, body, what the user sees)
    (
        "vLLM 0.32 nested, int code",
        400,
        nested(VLLM_MAX_TOKENS, 400),
        want(VLLM_MAX_TOKENS, BAD_REQUEST, 400),
    ),
    (
        "vLLM 0.32 prompt too long",
        400,
        nested(VLLM_PROMPT, 400),
        want(VLLM_PROMPT, BAD_REQUEST, 400),
    ),
    (
        "newer vLLM, string code",
        400,
        nested(VLLM_PROMPT, "context_length_exceeded", "input_tokens"),
        want(VLLM_PROMPT, BAD_REQUEST, "context_length_exceeded", "input_tokens"),
    ),
    ("older vLLM flat body", 400, flat(OLD_VLLM), want(OLD_VLLM, BAD_REQUEST, 400)),
    ("SGLang flat body", 400, flat(SGLANG), want(SGLANG, BAD_REQUEST, 400)),
    (
        "unknown model 404",
        404,
        json.dumps(
            {
                "error": {
                    "message": NOT_FOUND,
                    "type": "NotFoundError",
                    "param": "model",
                    "code": 404,
                }
            }
        ),
        want(NOT_FOUND, "NotFoundError", 404, "model"),
    ),
    ("FastAPI detail string", 404, '{"detail": "Not Found"}', want("Not Found")),
    (
        "FastAPI validation detail list",
        422,
        json.dumps({"detail": VALIDATION}),
        want(json.dumps(VALIDATION)),
    ),
    (
        "vllm-router 500 wrapping a prefill worker's 400",
        500,
        ROUTER_WRAP.format(400, "Bad Request") + nested(DECODE_MAX_TOKENS, 400),
        want(DECODE_MAX_TOKENS, BAD_REQUEST, 400, wrapped=400),
    ),
    (
        "vllm-router 500 wrapping a worker's 503",
        500,
        ROUTER_WRAP.format(503, "Service Unavailable") + flat("Service is overloaded"),
        want("Service is overloaded", BAD_REQUEST, 400, wrapped=503, retry=True),
    ),
    (
        "vllm-router 500 wrapping a worker's 400 as text",
        500,
        ROUTER_WRAP.format(400, "Bad Request") + "prompt too long",
        want(ROUTER_WRAP.format(400, "Bad Request") + "prompt too long", wrapped=400),
    ),
    (
        "vllm-router 503, all circuits open",
        503,
        "all circuits open",
        want("all circuits open", retry=True),
    ),
    (
        "vllm-router 503, no available workers",
        503,
        "No available workers for the request",
        want("No available workers for the request", retry=True),
    ),
    ("429 text", 429, "Too Many Requests", want("Too Many Requests", retry=True)),
    ("408 text", 408, "Request Timeout", want("Request Timeout", retry=True)),
    ("non-JSON 500", 500, "Internal Server Error", want("Internal Server Error", retry=True)),
    ("empty 502", 502, "", want("(empty body, HTTP 502)", retry=True)),
    ("whitespace-only 400", 400, " \n", want("(empty body, HTTP 400)")),
    ("plain 400 text", 400, "Bad Request", want("Bad Request")),
    ("JSON that is not an error object", 400, '["unexpected"]', want('["unexpected"]')),
    ("OpenAI-style error string", 401, '{"error": "Unauthorized"}', want("Unauthorized")),
]


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [case[1:] for case in BODIES],
    ids=[case[0] for case in BODIES],
)
def test_parse_error(status, body, expected):
    error = parse_error(status, body)

    seen = {name: getattr(error, name) for name in expected}
    assert seen == expected
    assert error.status == status


def test_wrapped_error_decides_by_the_workers_status():
    error = parse_error(
        500,
        "Request processing failed: Prefill server error 400 Bad Request: "
        + nested(DECODE_MAX_TOKENS, 400),
    )

    assert error.effective_status == 400
    assert error.describe() == f"HTTP 500 (worker said 400): {DECODE_MAX_TOKENS}"


def test_describe_keeps_the_engine_words():
    assert parse_error(400, nested(VLLM_MAX_TOKENS, 400)).describe() == (
        f"HTTP 400: {VLLM_MAX_TOKENS}"
    )


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 422])
def test_a_4xx_is_an_answer_not_a_glitch(status):
    assert not parse_error(status, nested("no", status)).retryable


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504])
def test_overload_and_outages_are_retryable(status):
    assert parse_error(status, "busy").retryable


def test_long_messages_are_trimmed_and_say_how_long_they_were():
    error = parse_error(400, nested("x" * 10_000, 400))

    assert error.message == "x" * MAX_MESSAGE_CHARS + "… (10,000 characters)"


def test_message_whitespace_is_kept_verbatim():
    message = "line one\n  line two\t(tab)"

    assert parse_error(400, nested(message, 400)).message == message


WORKER = "http://127.0.0.1:18201"


UNREACHABLE = [
    # (case, status, body, the cause shown)
    (
        "vllm-router prefill/decode, decode refused",
        500,
        "Transparent proxy request failed: Network error: Decode request failed to "
        f"{WORKER}/v1/chat/completions: error sending request for url "
        f"({WORKER}/v1/chat/completions) caused by: client error (Connect) caused by: tcp "
        "connect error caused by: Connection refused (os error 111)",
        " (Connection refused (os error 111))",
    ),
    (
        "vllm-router plain mode",
        500,
        f"Request failed: error sending request for url ({WORKER}/v1/chat/completions)",
        "",
    ),
    (
        "sglang-router JSON",
        500,
        json.dumps(
            {
                "error": {
                    "type": "Internal Server Error",
                    "code": "call_upstream_request_error",
                    "message": f"error sending request for url ({WORKER}/v1/completions). "
                    f"URL: {WORKER}/v1/completions",
                }
            }
        ),
        "",
    ),
]


@pytest.mark.parametrize(
    ("status", "body", "cause"),
    [case[1:] for case in UNREACHABLE],
    ids=[case[0] for case in UNREACHABLE],
)
def test_a_router_that_cannot_reach_its_worker_names_it(status, body, cause):
    error = parse_error(status, body)

    assert error.unreachable_worker == WORKER
    assert error.wrapped_status is None  # "os error 111" is an errno, not the worker's status
    assert error.effective_status == 500 and error.retryable
    assert error.describe() == (
        f"HTTP 500: worker {WORKER} is unreachable{cause}; the router said: {error.message}"
    )


def test_an_errno_is_never_a_wrapped_status():
    error = parse_error(500, "upstream failed: Connection reset by peer (os error 104)")

    assert error.wrapped_status is None and error.retryable
    assert error.unreachable_worker is None


def test_a_4xx_naming_a_url_is_no_unreachable_worker():
    error = parse_error(400, f"error sending request for url ({WORKER}/v1/completions)")

    assert error.unreachable_worker is None and not error.retryable


@pytest.mark.parametrize(
    ("error", "refused"),
    [
        (parse_error(401, '{"error": "Unauthorized"}'), True),  # vLLM's --api-key middleware
        (parse_error(403, '{"detail": "Not authenticated"}'), True),
        (
            parse_error(500, 'Prefill server error 401 Unauthorized: {"error": "Unauthorized"}'),
            True,
        ),
        (parse_error(400, '{"message": "max_tokens is too large"}'), False),
        (parse_error(404, '{"detail": "Not Found"}'), False),
        (EngineError(0, "connection failed"), False),
    ],
    ids=["401", "403", "a worker's 401 wrapped by the router", "400", "404", "no answer"],
)
def test_credentials_advice_only_for_a_refused_key(error, refused):
    advice = credentials_advice(error)
    if refused:
        assert advice == (
            "The server refused the credentials: pass the API key it expects with --api-key, "
            "or set EVALGATE_API_KEY or OPENAI_API_KEY."
        )
    else:
        assert advice is None


# Any engine answer parses: an error to a line, a 4xx never retried, a completion or malformed.


statuses = st.integers(min_value=100, max_value=599)


error_objects = st.fixed_dictionaries(
    {},
    optional={
        "message": json_scalars,
        "type": json_scalars,
        "code": json_scalars,
        "param": json_scalars,
        "object": st.just("error"),
        "detail": json_values,
    },
)


error_bodies = st.one_of(
    st.text(max_size=300),
    error_objects.map(json.dumps),
    error_objects.map(lambda obj: json.dumps({"error": obj})),
    st.tuples(
        st.sampled_from(
            [
                "Request processing failed: Prefill server error 400 Bad Request: ",
                "Request processing failed: Prefill server error 503 Service Unavailable: ",
                "upstream error 429: ",
                "",
            ]
        ),
        error_objects.map(json.dumps),
    ).map("".join),
)


@QUICK
@given(statuses, error_bodies)
def test_an_error_answer_always_parses_to_a_readable_line(status, body):
    error = parse_error(status, body)

    assert error.status == status
    # verbatim, even when the engine said ""; past the cap, that much and the length
    assert len(error.message) <= MAX_MESSAGE_CHARS + len("… (1,000,000 characters)")
    assert error.describe().startswith(f"HTTP {status}")
    assert error.retryable == (
        error.effective_status in (408, 429) or 500 <= error.effective_status < 600
    )


@QUICK
@given(st.integers(min_value=500, max_value=599), error_objects.map(json.dumps))
def test_a_routers_500_around_a_workers_400_is_not_retried(status, inner):
    body = f"Request processing failed: Prefill server error 400 Bad Request: {inner}"

    error = parse_error(status, body)

    if error.wrapped_status is not None:  # recognised as wrapped: the worker's 400 decides
        assert error.wrapped_status == 400
        assert not error.retryable


@QUICK
@example(400, 'Prefill server error 503 Service Unavailable: {"message": "x"}')
@given(
    st.integers(min_value=400, max_value=499).filter(lambda s: s not in (408, 429)),
    error_bodies,
)
def test_a_4xx_answer_is_never_retried(status, body):
    assert not parse_error(status, body).retryable


contents = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), max_size=3),
    json_values,
)


choices = st.fixed_dictionaries(
    {},
    optional={
        "message": st.fixed_dictionaries({}, optional={"content": contents}) | json_values,
        "text": contents,
        "finish_reason": json_scalars,
    },
)


completions = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"choices": st.lists(choices, max_size=2) | json_values},
        optional={"usage": st.fixed_dictionaries({}, optional={"completion_tokens": json_scalars})},
    ),
)


@QUICK
@given(completions, st.sampled_from(["chat", "completions"]))
def test_a_completion_is_text_or_malformed_never_a_crash(raw, api):
    try:
        answer = parse_answer(raw, api)
    except MalformedAnswer:
        return
    assert isinstance(answer.text, str)
    answer.text.encode("utf-8")  # the journal and samples.jsonl can always hold it
    assert answer.finish_reason is None or isinstance(answer.finish_reason, str)
    tokens = answer.completion_tokens
    assert tokens is None or (isinstance(tokens, int) and not isinstance(tokens, bool))
    assert answer.source in ("content", "reasoning_content", "reasoning", "text")


def test_a_lone_surrogate_is_replaced_and_a_pair_kept():
    raw = json.loads('{"choices": [{"message": {"content": "a \\ud83d b \\ud83d\\ude00"}}]}')

    assert parse_answer(raw, "chat").text == "a \ufffd b \U0001f600"
