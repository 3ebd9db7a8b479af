"""The fake engine speaks vLLM 0.32's wire formats and injects each fault as documented.

Real HTTP against 127.0.0.1: urllib for the raw bytes, the openai SDK for the shapes it parses.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import openai
import pytest

from tests.conftest import DOCS
from tests.fakeengine import (
    CHAT_PATH,
    COMPLETIONS_PATH,
    FILLER,
    EngineBehaviour,
    FakeEngine,
    Fault,
    count_chat_tokens,
    count_tokens,
    expected_right,
    iter_sse,
    refused_url,
    stable_fraction,
    truncate_tokens,
    unused_port,
    wrong_number,
)

pytestmark = pytest.mark.loopback


JANET = DOCS[0]  # "Janet's ducks lay 16 eggs per day. ..." -> 18


def ask(question: str) -> str:
    return f"Question: {question}\nAnswer:"


def chat_body(question: str, **extra: Any) -> dict[str, Any]:
    shot = [
        {"role": "user", "content": ask(DOCS[5].question)},
        {"role": "assistant", "content": DOCS[5].answer},
    ]
    messages = [{"role": "system", "content": "Solve it."}, *shot]
    return {
        "model": "fake-model",
        "messages": [*messages, {"role": "user", "content": ask(question)}],
        "max_tokens": 256,
        **extra,
    }


def completion_body(question: str, **extra: Any) -> dict[str, Any]:
    prompt = f"{ask(DOCS[5].question)} {DOCS[5].answer}\n\n{ask(question)}"
    return {"model": "fake-model", "prompt": prompt, "max_tokens": 256, **extra}


def request(
    url: str, body: dict[str, Any] | None = None, timeout: float = 5.0
) -> tuple[int, str, str]:
    """(status, content type, body text) of one request; HTTP errors are answers too."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read().decode()


def post_json(url: str, body: dict[str, Any]) -> tuple[int, Any]:
    status, _, text = request(url, body)
    return status, json.loads(text)


def post_json_get(url: str) -> tuple[int, Any]:
    status, _, text = request(url)
    return status, json.loads(text)


def stream(url: str, body: dict[str, Any]) -> tuple[str, list[str]]:
    """Content type and the SSE data payloads of a streamed answer."""
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=5) as response:
        return response.headers["Content-Type"], list(iter_sse(iter(response.readline, b"")))


def final_number(text: str) -> str:
    return text.rsplit("#### ", 1)[1].strip()


def test_models_version_health_speak_vllm(engine):
    status, models = post_json_get(engine.url + "/models")
    assert status == 200
    assert models["object"] == "list"
    card = models["data"][0]
    assert card["id"] == card["root"] == "fake-model"
    assert card["object"] == "model"
    assert card["owned_by"] == "vllm"
    assert card["parent"] is None
    assert card["max_model_len"] == 4096
    assert card["permission"][0]["object"] == "model_permission"
    assert post_json_get(engine.root_url + "/version") == (200, {"version": "0.32.0"})
    assert request(engine.root_url + "/health")[::2] == (200, "")
    assert request(engine.root_url + "/nowhere")[0] == 404
    assert request(engine.url + "/models", {})[0] == 405


def test_models_variants_are_settings():
    behaviour = EngineBehaviour(
        dialect="sglang",
        listed_model="other-name",
        list_max_model_len=False,
        version=None,
        healthy=False,
    )
    with FakeEngine(behaviour) as engine:
        card = post_json_get(engine.url + "/models")[1]["data"][0]
        assert card["id"] == "other-name"
        assert card["owned_by"] == "sglang"
        assert "max_model_len" not in card
        assert request(engine.root_url + "/version")[0] == 404
        assert request(engine.root_url + "/health")[0] == 503
        # The served name stays the real one: the listed name is refused.
        assert post_json(engine.url + "/chat/completions", chat_body(JANET.question))[0] == 200
        status, _ = post_json(
            engine.url + "/chat/completions", chat_body(JANET.question, model="other-name")
        )
        assert status == 404


def test_token_rule_is_shared_by_tokenize_and_usage(engine):
    assert count_tokens("Janet's ducks: 16-3.") == 9  # Janet ' s ducks : 16 - 3 .
    assert truncate_tokens("a, b c", 2) == "a,"
    messages = chat_body(JANET.question)["messages"]
    expected = sum(count_tokens(m["content"]) for m in messages) + 4 * len(messages) + 2
    assert count_chat_tokens(messages) == expected

    status, tokens = post_json(
        engine.root_url + "/tokenize", {"model": "fake-model", "messages": messages}
    )
    assert status == 200
    assert tokens["count"] == len(tokens["tokens"]) == expected
    assert tokens["max_model_len"] == 4096
    prompt = completion_body(JANET.question)["prompt"]
    tokens = post_json(engine.root_url + "/tokenize", {"model": "fake-model", "prompt": prompt})[1]
    assert tokens["count"] == count_tokens(prompt)

    usage = post_json(engine.url + "/chat/completions", chat_body(JANET.question))[1]["usage"]
    assert usage["prompt_tokens"] == expected
    usage = post_json(engine.url + "/completions", completion_body(JANET.question))[1]["usage"]
    assert usage["prompt_tokens"] == count_tokens(prompt)


def test_chat_answers_the_last_question_with_its_worked_answer(engine):
    status, answer = post_json(engine.url + "/chat/completions", chat_body(JANET.question))
    assert status == 200
    assert answer["object"] == "chat.completion"
    assert answer["id"].startswith("chatcmpl-")
    assert answer["model"] == "fake-model"
    choice = answer["choices"][0]
    assert choice["message"]["role"] == "assistant"
    content = choice["message"]["content"]
    assert content.startswith("Janet sells 16 - 3 - 4 = 9 duck eggs a day.")
    assert content.endswith("\n#### 18")
    assert "<<" not in content
    assert (choice["finish_reason"], choice["stop_reason"]) == ("stop", None)
    usage = answer["usage"]
    assert usage["completion_tokens"] == count_tokens(content)
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_completions_continue_the_prompt_and_honour_stop_strings():
    behaviour = EngineBehaviour(trailer="\n\nQuestion: What comes next?\nAnswer: 5")
    with FakeEngine(behaviour) as engine:
        body = completion_body(JANET.question)
        answer = post_json(engine.url + "/completions", body)[1]
        assert answer["object"] == "text_completion"
        assert answer["id"].startswith("cmpl-")
        text = answer["choices"][0]["text"]
        assert text.startswith(" Janet sells")
        assert text.endswith("What comes next?\nAnswer: 5")

        body["stop"] = ["Question:", "</s>"]
        choice = post_json(engine.url + "/completions", body)[1]["choices"][0]
        assert choice["text"].endswith("#### 18\n\n")
        assert (choice["finish_reason"], choice["stop_reason"]) == ("stop", "Question:")


def test_chat_stream_is_vllms_event_sequence(engine):
    plain = post_json(engine.url + "/chat/completions", chat_body(JANET.question))[1]
    body = chat_body(JANET.question, stream=True, stream_options={"include_usage": True})
    content_type, events = stream(engine.url + "/chat/completions", body)
    assert content_type.startswith("text/event-stream")
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    deltas = [c["choices"][0] for c in chunks[1:-1]]
    assert (
        "".join(d["delta"]["content"] for d in deltas) == plain["choices"][0]["message"]["content"]
    )
    assert [d["finish_reason"] for d in deltas[:-1]] == [None] * (len(deltas) - 1)
    assert deltas[-1]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["completion_tokens"] == plain["usage"]["completion_tokens"]


def chunks_of(events: list[str]) -> list[dict[str, Any]]:
    """The JSON chunks of a stream that ended with [DONE]."""
    assert events[-1] == "[DONE]"
    return [json.loads(e) for e in events[:-1]]


STREAMED = chat_body(JANET.question, stream=True, stream_options={"include_usage": True})


"""JANET's question, its answer streamed with the usage last."""


def asked_twice(engine: FakeEngine) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """JANET's question to `engine`, answered whole and then streamed (its JSON chunks)."""
    plain = post_json(engine.url + "/chat/completions", chat_body(JANET.question))[1]
    return plain, chunks_of(stream(engine.url + "/chat/completions", STREAMED)[1])


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_a_reasoning_model_streams_its_thinking_before_its_answer(field):
    behaviour = EngineBehaviour(thinking=field, thinking_tokens=14)
    with FakeEngine(behaviour) as engine:
        plain, chunks = asked_twice(engine)
        client = openai.OpenAI(base_url=engine.url, api_key="none", max_retries=0)
        parsed = list(
            client.chat.completions.create(
                model="fake-model", messages=STREAMED["messages"], stream=True
            )
        )
    message = plain["choices"][0]["message"]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    deltas = [c["choices"][0] for c in chunks[1:-1]]
    keys = [next(iter(d["delta"])) for d in deltas]
    thinking = keys.count(field)
    assert (
        thinking
        == 2 * count_tokens(FILLER)
        == plain["usage"]["completion_tokens_details"]["reasoning_tokens"]
    )
    assert keys == [field] * thinking + ["content"] * (len(keys) - thinking)
    assert all(len(d["delta"]) == 1 for d in deltas)  # one field a delta, as vLLM's exclude_unset
    assert "".join(d["delta"][field] for d in deltas[:thinking]) == message[field]
    assert "".join(d["delta"]["content"] for d in deltas[thinking:]) == message["content"]
    assert final_number(message["content"]) == "18"
    assert [d["finish_reason"] for d in deltas] == [None] * (len(deltas) - 1) + ["stop"]
    assert chunks[-1]["choices"] == []
    usage = chunks[-1]["usage"]
    assert usage["completion_tokens"] == plain["usage"]["completion_tokens"]
    assert usage["completion_tokens_details"] == {"reasoning_tokens": thinking}
    # The openai SDK keeps the reasoning field of each delta as an extra.
    extras = [p.choices[0].delta.model_extra or {} for p in parsed]
    assert "".join(e.get(field) or "" for e in extras) == message[field]


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_a_stream_cut_while_thinking_sends_only_reasoning_then_length(field):
    behaviour = EngineBehaviour(thinking=field, endless_thinking=1.0)
    with FakeEngine(behaviour) as engine:
        plain, chunks = asked_twice(engine)
    assert plain["choices"][0]["message"]["content"] is None
    assert plain["choices"][0]["finish_reason"] == "length"
    deltas = [c["choices"][0] for c in chunks[1:-1]]
    assert len(deltas) == 256  # the whole budget, one thinking token a delta
    assert all(list(d["delta"]) == [field] for d in deltas)
    assert "".join(d["delta"][field] for d in deltas) == plain["choices"][0]["message"][field]
    assert deltas[-1]["finish_reason"] == "length" and deltas[-1]["stop_reason"] is None
    assert chunks[-1]["usage"]["completion_tokens"] == 256
    assert chunks[-1]["usage"]["completion_tokens_details"] == {"reasoning_tokens": 256}


@pytest.mark.parametrize("opened", ["open", "prompt"])
def test_thinking_written_into_the_answer_chat_and_completions(opened):
    """No reasoning parser: the thinking is the answer's own text, `<think>` (unless the
    template opened it), a scratchpad naming the right number, `</think>`, then the answer."""
    behaviour = EngineBehaviour(inline_thinking=opened, accuracy=0.0, thinking_tokens=14)
    with FakeEngine(behaviour) as engine:
        chat = post_json(engine.url + "/chat/completions", chat_body(JANET.question))[1]
        text = post_json(engine.url + "/completions", completion_body(JANET.question))[1]
    content = chat["choices"][0]["message"]["content"]
    completed = text["choices"][0]["text"]
    assert completed == " " + content  # the same answer, continuing the prompt
    assert content.startswith("<think>\nA first guess: #### 18\n" if opened == "open" else "A fi")
    thought, answer = content.split("\n</think>\n\n")
    assert "<think>" not in answer and FILLER in thought
    assert final_number(answer) == "19"  # wrong (accuracy 0), the scratchpad right
    assert "reasoning_content" not in chat["choices"][0]["message"] or (
        chat["choices"][0]["message"]["reasoning_content"] is None
    )
    assert chat["usage"]["completion_tokens"] == count_tokens(content)


def test_thinking_written_into_the_answer_that_never_ends_is_cut_before_its_end():
    behaviour = EngineBehaviour(inline_thinking="open", endless_thinking=1.0)
    with FakeEngine(behaviour) as engine:
        chat = post_json(engine.url + "/chat/completions", chat_body(JANET.question))[1]
    choice = chat["choices"][0]
    assert choice["finish_reason"] == "length"
    assert chat["usage"]["completion_tokens"] == 256  # the whole budget
    assert choice["message"]["content"].startswith("<think>\nA first guess: #### 18\n")
    assert "</think>" not in choice["message"]["content"]


def test_an_answer_in_the_reasoning_field_streams_there(engine):
    engine.behaviour.answer_field = "reasoning_content"
    plain = post_json(engine.url + "/chat/completions", chat_body(JANET.question))[1]
    body = chat_body(JANET.question, stream=True)
    chunks = chunks_of(stream(engine.url + "/chat/completions", body)[1])
    deltas = [c["choices"][0]["delta"] for c in chunks[1:]]
    assert all(list(d) == ["reasoning_content"] for d in deltas)
    answer = plain["choices"][0]["message"]["reasoning_content"]
    assert "".join(d["reasoning_content"] for d in deltas) == answer
    assert final_number(answer) == "18"
    assert plain["choices"][0]["message"]["content"] is None
    assert all("usage" not in c for c in chunks)


def test_completions_stream_without_usage(engine):
    _, events = stream(engine.url + "/completions", completion_body(JANET.question, stream=True))
    chunks = [json.loads(e) for e in events[:-1]]
    assert all("usage" not in c for c in chunks)
    assert "".join(c["choices"][0]["text"] for c in chunks).endswith("#### 18")
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


def test_openai_sdk_parses_every_shape(engine):
    client = openai.OpenAI(base_url=engine.url, api_key="none", max_retries=0)
    body = chat_body(JANET.question)
    chat = client.chat.completions.create(model="fake-model", messages=body["messages"])
    assert final_number(chat.choices[0].message.content) == "18"
    pieces = client.chat.completions.create(
        model="fake-model", messages=body["messages"], stream=True
    )
    assert final_number("".join(p.choices[0].delta.content or "" for p in pieces)) == "18"
    text = client.completions.create(
        model="fake-model", prompt=completion_body(JANET.question)["prompt"], max_tokens=300
    )
    assert final_number(text.choices[0].text) == "18"
    assert client.models.list().data[0].id == "fake-model"
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="nope", messages=body["messages"])


def test_unknown_model_is_vllms_404(engine):
    status, body = post_json(engine.url + "/completions", completion_body("x", model="nope"))
    assert status == 404
    assert body == {
        "error": {
            "message": "The model `nope` does not exist. Valid aliases: fake-model.",
            "type": "NotFoundError",
            "param": "model",
            "code": 404,
        }
    }


MAX_TOKENS_TOO_BIG = (
    "max_tokens=2000 cannot be greater than max_model_len=1024. Please request fewer output "
    "tokens. (parameter=max_tokens, value=2000)"
)


PROMPT_TOO_LONG = (
    "This model's maximum context length is 1024 tokens. However, your prompt contains at least "
    "1025 input tokens, which exceeds this limit even without any output tokens. Please reduce "
    "the length of the input prompt. (parameter=input_tokens, value=1025)"
)


NO_ROOM = "max_tokens must be at least 1, got 0. (parameter=max_tokens, value=0)"


@pytest.mark.parametrize(
    ("prompt_tokens", "max_tokens", "status", "expected"),
    [
        (37, 2000, 400, ("max_tokens", MAX_TOKENS_TOO_BIG)),
        (1025, 10, 400, ("input_tokens", PROMPT_TOO_LONG)),
        (5000, None, 400, ("input_tokens", PROMPT_TOO_LONG)),
        (1024, 10, 400, ("max_tokens", NO_ROOM)),
        (1024, None, 400, ("max_tokens", NO_ROOM)),
        (37, 1000, 200, ("length", 987)),  # REFERENCE: 37 + 1000 > 1024 -> 987 tokens, "length"
        (37, None, 200, ("length", 987)),  # no max_tokens: the rest of the context
        (1000, 24, 200, ("length", 24)),  # exactly fills the context
        (37, 10, 200, ("length", 10)),
    ],
)
def test_vllm_032_length_rules(prompt_tokens, max_tokens, status, expected):
    with FakeEngine(max_model_len=1024) as engine:
        body = {"model": "fake-model", "prompt": "x " * prompt_tokens, "ignore_eos": True}
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        got_status, answer = post_json(engine.url + "/completions", body)
        assert got_status == status
        if status == 400:
            param, message = expected
            assert answer == {
                "error": {
                    "message": message,
                    "type": "BadRequestError",
                    "param": param,
                    "code": 400,
                }
            }
        else:
            finish, tokens = expected
            assert answer["choices"][0]["finish_reason"] == finish
            assert answer["usage"]["completion_tokens"] == tokens
            assert count_tokens(answer["choices"][0]["text"]) == tokens
            assert answer["usage"]["prompt_tokens"] == prompt_tokens


def test_chat_names_max_completion_tokens_and_rejects_streams_before_any_event():
    with FakeEngine(max_model_len=1024) as engine:
        body = chat_body(JANET.question, max_completion_tokens=1500)
        status, answer = post_json(engine.url + "/chat/completions", body)
        assert status == 400
        assert answer["error"]["message"].startswith("max_completion_tokens=1500 cannot be greater")
        assert answer["error"]["param"] == "max_completion_tokens"

        body = chat_body(JANET.question, max_tokens=12288, stream=True)
        status, content_type, text = request(engine.url + "/chat/completions", body)
        assert (status, content_type) == (400, "application/json")
        assert json.loads(text)["error"]["message"].startswith("max_tokens=12288 cannot be")


def test_a_small_budget_cuts_the_final_answer_off():
    with FakeEngine(reply_tokens=300) as engine:
        full = post_json(
            engine.url + "/chat/completions", chat_body(JANET.question, max_tokens=400)
        )
        content = full[1]["choices"][0]["message"]["content"]
        assert count_tokens(content) >= 300
        assert final_number(content) == "18"
        cut = post_json(engine.url + "/chat/completions", chat_body(JANET.question, max_tokens=100))
        choice = cut[1]["choices"][0]
        assert choice["finish_reason"] == "length"
        assert "####" not in choice["message"]["content"]
        assert cut[1]["usage"]["completion_tokens"] == 100


def test_flat_and_sglang_dialects():
    with FakeEngine(max_model_len=1024, dialect="vllm-flat") as engine:
        body = {"model": "fake-model", "prompt": "hi", "max_tokens": 2000}
        status, answer = post_json(engine.url + "/completions", body)
        assert status == 400
        assert answer == {
            "object": "error",
            "message": MAX_TOKENS_TOO_BIG,
            "type": "BadRequestError",
            "param": "max_tokens",
            "code": 400,
        }
    with FakeEngine(max_model_len=1024, dialect="sglang") as engine:
        body = {"model": "fake-model", "prompt": "x " * 30, "max_tokens": 1000}
        status, answer = post_json(engine.url + "/completions", body)
        assert status == 400
        assert answer["object"] == "error"
        assert answer["message"] == (
            "Requested token count exceeds the model's maximum context length of 1024 tokens. "
            "You requested a total of 1030 tokens: 30 tokens from the input messages and 1000 "
            "tokens for the completion. Please reduce the number of tokens in the input messages "
            "or the completion to fit within the limit."
        )
        body = {"model": "fake-model", "prompt": "x " * 1024, "max_tokens": 10}
        answer = post_json(engine.url + "/completions", body)[1]
        assert answer["message"] == (
            "The input (1024 tokens) is longer than the model's context length (1024 tokens)."
        )


def answers(engine: FakeEngine, docs) -> list[str]:
    return [
        final_number(
            post_json(engine.url + "/chat/completions", chat_body(d.question))[1]["choices"][0][
                "message"
            ]["content"]
        )
        for d in docs
    ]


def test_accuracy_is_exact_on_every_prefix_and_the_same_each_run():
    docs = DOCS[:20]
    with FakeEngine(accuracy=0.75) as first:
        run1 = answers(first, docs)
    with FakeEngine(accuracy=0.75) as second:
        run2 = answers(second, docs)
    assert run1 == run2
    right = [got == d.number for got, d in zip(run1, docs, strict=True)]
    assert sum(right) == expected_right(20, 0.75) == 15
    assert sum(right[:8]) == expected_right(8, 0.75) == 6
    assert right[0]  # the first question is answered right
    for got, d, ok in zip(run1, docs, right, strict=True):
        assert got == (d.number if ok else wrong_number(d.number))
    assert wrong_number("2,125") == "2126"


def test_wrong_questions_and_unknown_questions():
    behaviour = EngineBehaviour(wrong_questions={JANET.question})
    with FakeEngine(behaviour) as engine:
        assert answers(engine, [JANET, DOCS[1]]) == ["19", DOCS[1].number]
        assert not behaviour.is_right(JANET.question)
        body = chat_body("What is the airspeed of a swallow?")
        content = post_json(engine.url + "/chat/completions", body)[1]["choices"][0]["message"]
        assert content["content"] == "#### 0"
    with FakeEngine(accuracy=0.0) as engine:
        assert answers(engine, DOCS[:3]) == [wrong_number(d.number) for d in DOCS[:3]]


def test_refused_connections():
    for url in (refused_url(), f"http://127.0.0.1:{unused_port()}/v1"):
        with pytest.raises(urllib.error.URLError) as caught:
            request(url + "/models")
        assert isinstance(caught.value.reason, ConnectionRefusedError)
    engine = FakeEngine()
    url = engine.url
    assert request(url + "/models")[0] == 200
    engine.stop()
    with pytest.raises(urllib.error.URLError) as caught:
        request(url + "/models")
    assert isinstance(caught.value.reason, ConnectionRefusedError)


def test_an_engine_that_comes_up_later_on_the_same_port():
    engine = FakeEngine(start=False)
    try:
        with pytest.raises(urllib.error.URLError):
            request(engine.url + "/models")
        engine.start()
        assert request(engine.url + "/models")[0] == 200
        engine.stop()
        engine.start()
        assert request(engine.url + "/models")[0] == 200
    finally:
        engine.stop()


def test_reset_and_close(engine):
    engine.inject(Fault("reset", times=1))
    with pytest.raises(ConnectionResetError):
        request(engine.url + "/chat/completions", chat_body(JANET.question))
    engine.behaviour.faults = [Fault("close", times=1)]
    with pytest.raises(http.client.RemoteDisconnected):
        request(engine.url + "/chat/completions", chat_body(JANET.question))
    assert request(engine.url + "/chat/completions", chat_body(JANET.question))[0] == 200
    assert [(r.fault, r.status) for r in engine.requests] == [
        ("reset", None),
        ("close", None),
        (None, 200),
    ]


def test_hang_until_released(engine):
    engine.inject(Fault("hang", times=1))
    outcome: list[int] = []
    client = threading.Thread(
        target=lambda: outcome.append(
            request(engine.url + "/chat/completions", chat_body(JANET.question))[0]
        )
    )
    client.start()
    assert engine.wait_until(lambda e: e.hanging == 1)
    assert outcome == []
    assert engine.in_flight == 1
    engine.release()
    client.join(5)
    assert outcome == [200]
    assert engine.hanging == 0


def test_hang_times_the_client_out_and_stop_is_still_prompt():
    engine = FakeEngine()
    engine.inject(Fault("hang"))
    with pytest.raises(TimeoutError):
        request(engine.url + "/chat/completions", chat_body(JANET.question), timeout=0.2)
    errors: list[BaseException] = []

    def hung_client() -> None:
        try:
            request(engine.url + "/chat/completions", chat_body(JANET.question))
        except (OSError, http.client.HTTPException) as exc:
            errors.append(exc)

    client = threading.Thread(target=hung_client)
    client.start()
    assert engine.wait_until(lambda e: e.hanging == 2)
    started = time.monotonic()
    engine.stop()
    assert time.monotonic() - started < 1.0
    client.join(5)
    assert len(errors) == 1  # the connection closed without an answer
    assert engine.hanging == 0
    assert [r.status for r in engine.requests] == [None, None]


def test_stop_closes_idle_keep_alive_connections():
    engine = FakeEngine()
    connection = http.client.HTTPConnection("127.0.0.1", engine.port, timeout=5)
    connection.request("GET", "/v1/models")
    response = connection.getresponse()
    assert response.status == 200
    response.read()
    started = time.monotonic()
    engine.stop()
    assert time.monotonic() - started < 1.0
    with pytest.raises((OSError, http.client.HTTPException)):
        connection.request("GET", "/v1/models")
        connection.getresponse()
    connection.close()


def test_delay(engine):
    engine.inject(Fault("delay", delay_s=0.2, times=1))
    started = time.monotonic()
    assert request(engine.url + "/chat/completions", chat_body(JANET.question))[0] == 200
    assert time.monotonic() - started >= 0.2


def test_router_busy_for_the_first_requests_then_for_a_time(engine):
    engine.inject(Fault("router_busy", times=2))
    url = engine.url + "/chat/completions"
    assert request(url, chat_body(JANET.question)) == (
        503,
        "text/plain; charset=utf-8",
        "all circuits open",
    )
    assert request(url, chat_body(JANET.question))[0] == 503
    assert request(url, chat_body(JANET.question))[0] == 200

    window = Fault("router_busy", seconds=60, message="No available workers")
    engine.behaviour.faults = [window]
    assert request(url, chat_body(JANET.question))[::2] == (503, "No available workers")
    window.armed_at -= 60  # the window is over, without waiting for it
    assert request(url, chat_body(JANET.question))[0] == 200
    assert engine.status_counts == {503: 3, 200: 2}


def test_error_on_the_nth_request_once(engine):
    engine.inject(Fault("error", nth={2}))
    url = engine.url + "/completions"
    statuses = [post_json(url, completion_body(d.question)) for d in DOCS[:3]]
    assert [s for s, _ in statuses] == [200, 500, 200]
    assert statuses[1][1] == {
        "error": {
            "message": "injected fault",
            "type": "InternalServerError",
            "param": None,
            "code": 500,
        }
    }


def test_each_chosen_question_fails_once_then_succeeds(engine):
    chosen = {DOCS[0].question, DOCS[1].question}
    engine.inject(Fault("error", questions=chosen, times_per_question=1))
    url = engine.url + "/chat/completions"
    order = [DOCS[0], DOCS[0], DOCS[1], DOCS[2], DOCS[1]]
    assert [request(url, chat_body(d.question))[0] for d in order] == [500, 200, 500, 200, 200]
    assert engine.attempts(DOCS[0].question) == 2
    assert engine.attempts(DOCS[2].question) == 1
    assert engine.attempts_by_question == {
        DOCS[0].question.strip(): 2,
        DOCS[1].question.strip(): 2,
        DOCS[2].question.strip(): 1,
    }
    assert engine.status_counts == {500: 2, 200: 3}


def test_a_deterministic_share_of_questions_fails(engine):
    engine.inject(Fault("error", share=0.5))
    url = engine.url + "/chat/completions"
    docs = DOCS[:20]
    failed = [request(url, chat_body(d.question))[0] == 500 for d in docs]
    assert failed == [stable_fraction(d.question.strip()) < 0.5 for d in docs]
    assert 0 < sum(failed) < 20


def test_400_for_chosen_questions_in_the_dialects_body():
    with FakeEngine(dialect="vllm-flat") as engine:
        message = "Sampled token IDs exceed the max model length."
        engine.inject(Fault("error", status=400, message=message, questions={JANET.question}))
        status, body = post_json(engine.url + "/chat/completions", chat_body(JANET.question))
        assert status == 400
        assert body == {
            "object": "error",
            "message": message,
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        }
        assert post_json(engine.url + "/chat/completions", chat_body(DOCS[1].question))[0] == 200


def test_malformed_json(engine):
    engine.inject(Fault("malformed_json", times=2))
    status, content_type, text = request(
        engine.url + "/chat/completions", chat_body(JANET.question)
    )
    assert (status, content_type) == (200, "application/json")
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    _, events = stream(engine.url + "/chat/completions", chat_body(JANET.question, stream=True))
    with pytest.raises(json.JSONDecodeError):
        json.loads(events[0])
    assert events[-1] == "[DONE]"


@pytest.mark.parametrize(("action", "content"), [("empty_content", ""), ("null_content", None)])
def test_empty_and_null_content(engine, action, content):
    engine.inject(Fault(action))
    status, body = post_json(engine.url + "/chat/completions", chat_body(JANET.question))
    assert status == 200
    assert body["choices"][0]["message"]["content"] == content
    assert body["usage"]["completion_tokens"] == 0
    body = post_json(engine.url + "/completions", completion_body(JANET.question))[1]
    assert body["choices"][0]["text"] == content


def test_length_fault(engine):
    engine.inject(Fault("length", tokens=5))
    body = post_json(engine.url + "/chat/completions", chat_body(JANET.question))[1]
    choice = body["choices"][0]
    assert choice["finish_reason"] == "length"
    assert choice["message"]["content"] == "Janet sells 16 - 3"
    assert body["usage"]["completion_tokens"] == 5


def test_die_mid_stream(engine):
    engine.inject(Fault("die_mid_stream", tokens=2))
    client = openai.OpenAI(base_url=engine.url, api_key="none", max_retries=0)
    received = []
    with pytest.raises(openai.APIConnectionError):  # incomplete chunked read
        for chunk in client.chat.completions.create(
            model="fake-model", messages=chat_body(JANET.question)["messages"], stream=True
        ):
            received.append(chunk)
    assert [c.choices[0].delta.content for c in received] == ["", "Janet"]
    assert engine.requests[0].status == 200
    assert engine.requests[0].fault == "die_mid_stream"
    # urllib ends a cut chunked stream quietly: no [DONE] is the only sign.
    _, events = stream(engine.url + "/chat/completions", chat_body(JANET.question, stream=True))
    assert len(events) == 2
    assert "[DONE]" not in events
    # Not streamed: half the announced body, then the connection closes.
    with pytest.raises(http.client.IncompleteRead):
        request(engine.url + "/chat/completions", chat_body(JANET.question))


def test_router_wrapped_errors():
    with FakeEngine(max_model_len=1024, router_wraps_errors=True) as engine:
        status, content_type, text = request(
            engine.url + "/chat/completions", chat_body(JANET.question, max_tokens=1500)
        )
        assert (status, content_type) == (500, "text/plain; charset=utf-8")
        prefix = "Request processing failed: Prefill server error 400 Bad Request: "
        assert text.startswith(prefix)
        inner = json.loads(text[len(prefix) :])
        assert inner["error"]["message"].startswith(
            "max_tokens=1500 cannot be greater than max_model_len=1024."
        )
    with FakeEngine() as engine:
        engine.inject(Fault("router_wrapped", message="boom", times=1))
        status, _, text = request(engine.url + "/completions", completion_body(JANET.question))
        assert status == 500
        assert text == (
            "Request processing failed: Prefill server error 400 Bad Request: "
            '{"error":{"message":"boom","type":"BadRequestError","param":null,"code":400}}'
        )


def test_sglang_router_shapes():
    with FakeEngine(router="sglang-router", max_model_len=1024) as front:
        root = front.root_url
        assert request(root + "/health") == (200, "text/plain; charset=utf-8", "OK")
        assert request(root + "/readiness") == (
            200,
            "application/json",
            '{"status":"ready","healthy_workers":1,"total_workers":1}',
        )
        assert request(front.url + "/models") == (
            200,
            "text/plain; charset=utf-8",
            '{"object":"list","data":[{"id":"unknown","object":"model","owned_by":"local"}]}',
        )
        assert request(root + "/tokenize", {"model": "fake-model", "prompt": "Hi"})[::2] == (
            404,
            "",
        )
        assert request(root + "/version")[::2] == (404, "")
        # The router renames max_tokens, so vLLM's message names max_completion_tokens.
        status, body = post_json(
            front.url + "/chat/completions", chat_body(JANET.question, max_tokens=1500)
        )
        assert status == 400
        assert body["error"]["message"].startswith(
            "max_completion_tokens=1500 cannot be greater than max_model_len=1024."
        )
        assert front.requests[-1].body["max_tokens"] == 1500  # recorded as the client sent it

        front.behaviour.workers_ready = False
        assert request(root + "/readiness") == (
            503,
            "application/json",
            '{"status":"not ready","reason":"insufficient healthy workers"}',
        )
        assert request(front.url + "/models")[::2] == (503, "No models available")
        assert request(root + "/health")[0] == 200  # liveness only
        assert post_json(front.url + "/chat/completions", chat_body(JANET.question)) == (
            503,
            {
                "error": {
                    "type": "Service Unavailable",
                    "code": "no_available_workers",
                    "message": "No available workers (all circuits open or unhealthy)",
                }
            },
        )


def test_a_worker_the_router_cannot_reach():
    worker = "http://127.0.0.1:18201"
    with FakeEngine() as front:
        front.inject(Fault("worker_unreachable", worker_url=worker, times=1))
        assert request(front.url + "/chat/completions", chat_body(JANET.question)) == (
            500,
            "text/plain; charset=utf-8",
            "Transparent proxy request failed: Network error: Decode request failed to "
            f"{worker}/v1/chat/completions: error sending request for url "
            f"({worker}/v1/chat/completions) caused by: client error (Connect) caused by: tcp "
            "connect error caused by: Connection refused (os error 111)",
        )
    with FakeEngine(router="sglang-router") as front:
        front.inject(Fault("worker_unreachable", worker_url=worker, times=1))
        url = f"{worker}/v1/completions"
        assert post_json(front.url + "/completions", completion_body(JANET.question)) == (
            500,
            {
                "error": {
                    "type": "Internal Server Error",
                    "code": "call_upstream_request_error",
                    "message": f"error sending request for url ({url}). URL: {url}",
                }
            },
        )


def test_vllm_router_readiness_and_an_engine_without_one():
    with FakeEngine(router="vllm-router") as front:
        assert request(front.root_url + "/readiness")[0] == 200
        front.behaviour.workers_ready = False
        assert request(front.root_url + "/readiness")[0] == 503
        assert request(front.url + "/chat/completions", chat_body(JANET.question))[::2] == (
            503,
            "No available workers (all circuits open or unhealthy)",
        )
    with FakeEngine() as engine:  # vLLM itself has no /readiness
        assert request(engine.root_url + "/readiness")[::2] == (404, '{"detail":"Not Found"}')


def test_faults_on_other_endpoints_and_switched_while_running(engine):
    busy = engine.inject(Fault("router_busy", paths={"/v1/models"}, times=1))
    assert request(engine.url + "/models")[0] == 503
    assert request(engine.url + "/models")[0] == 200
    assert request(engine.url + "/chat/completions", chat_body(JANET.question))[0] == 200
    busy.rearm()
    assert request(engine.url + "/models")[0] == 503
    engine.behaviour.faults.clear()
    assert request(engine.url + "/models")[0] == 200
    with pytest.raises(ValueError, match="unknown fault action"):
        Fault("explode")  # type: ignore[arg-type]


def test_request_log(engine):
    post_json(engine.url + "/chat/completions", chat_body(JANET.question))
    post_json(engine.url + "/completions", completion_body(DOCS[1].question, stream=False))
    request(engine.url + "/models")
    first, second = engine.requests
    assert (first.path, first.status, first.question) == (CHAT_PATH, 200, JANET.question.strip())
    assert first.body["messages"][-1]["content"] == ask(JANET.question)
    assert first.finish_reason == "stop"
    assert first.finished_at >= first.received_at
    assert (second.path, second.question) == (COMPLETIONS_PATH, DOCS[1].question.strip())
    assert [r.path for r in engine.log] == [CHAT_PATH, COMPLETIONS_PATH, "/v1/models"]
    assert engine.total == 2
    engine.clear()
    assert engine.total == 0
    assert engine.attempts_by_question == {}


def test_max_concurrency_queues_the_rest():
    with FakeEngine(max_concurrency=2, latency_s=0.1) as engine:
        url = engine.url + "/chat/completions"
        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=6) as pool:
            statuses = list(pool.map(lambda d: request(url, chat_body(d.question))[0], DOCS[:6]))
        elapsed = time.monotonic() - started
        assert statuses == [200] * 6
        assert engine.peak_active == 2
        assert engine.peak_in_flight > 2
        assert elapsed >= 0.3  # three rounds of two
        assert engine.wait_until(lambda e: e.in_flight == 0)
        assert engine.active == 0


def test_settings_are_checked():
    with pytest.raises(TypeError, match="no setting 'max_model_length'"):
        FakeEngine(max_model_length=5)
