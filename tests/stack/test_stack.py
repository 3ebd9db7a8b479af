"""The real engine stack answers as REFERENCE.md §1 says evalgate may rely on."""

from __future__ import annotations

import pytest

from .stack import EngineStack, chat, http_json, refusal, server_root

pytestmark = pytest.mark.engine


def served_max_model_len(base_url: str, model: str) -> int:
    status, body = http_json(f"{base_url}/models")
    assert status == 200, body
    (card,) = [card for card in body["data"] if card["id"] == model]
    return int(card["max_model_len"])


def test_single_engine_and_router_report_max_model_len(engine_single: EngineStack) -> None:
    assert engine_single.engine_url is not None
    assert served_max_model_len(engine_single.engine_url, engine_single.model) == 2048
    assert served_max_model_len(engine_single.router_url, engine_single.model) == 2048


def test_tokenize_returns_count(engine_single: EngineStack) -> None:
    assert engine_single.engine_url is not None
    for base_url in (engine_single.engine_url, engine_single.router_url):
        status, body = http_json(
            f"{server_root(base_url)}/tokenize",
            {"model": engine_single.model, "prompt": "Natalia sold clips to 48 of her friends."},
        )
        assert status == 200, body
        assert body["count"] == len(body["tokens"]) > 0
        assert body["max_model_len"] == 2048


def test_pd_router_reports_prefill_length_decode_its_own(engine_pd: EngineStack) -> None:
    assert engine_pd.prefill_url is not None and engine_pd.decode_url is not None
    assert engine_pd.router_max_model_len == engine_pd.prefill_max_model_len == 3072
    assert engine_pd.decode_max_model_len == 1536
    assert served_max_model_len(engine_pd.prefill_url, engine_pd.model) == 3072
    assert served_max_model_len(engine_pd.decode_url, engine_pd.model) == 1536
    # The router shows the prefill's card: the smaller decode limit is invisible through it...
    assert served_max_model_len(engine_pd.router_url, engine_pd.model) == 3072
    # ...while /tokenize through it is answered by the decode engine.
    status, body = http_json(
        f"{server_root(engine_pd.router_url)}/tokenize",
        {"model": engine_pd.model, "prompt": "Hello"},
    )
    assert status == 200, body
    assert body["max_model_len"] == 1536


def test_pd_decode_limit_comes_back_through_router(engine_pd: EngineStack) -> None:
    message = refusal(engine_pd.router_url, engine_pd.model, 2000)
    assert "cannot be greater than max_model_len=1536" in message


@pytest.mark.parametrize("topology", ["single", "pd"])
def test_chat_completion_through_router(topology: str, request: pytest.FixtureRequest) -> None:
    running: EngineStack = request.getfixturevalue(f"engine_{topology}")
    question = "What is 2 + 3? Answer with a number."
    status, body = chat(running.router_url, running.model, question, 16, temperature=0)
    assert status == 200, body
    text = body["choices"][0]["message"]["content"]
    assert isinstance(text, str) and text.strip()
    assert 0 < body["usage"]["completion_tokens"] <= 16
