"""Talking to an engine's side doors: /readiness, /v1/models, /tokenize, /version.

These requests tell evalgate whether an endpoint is ready, what it serves (its max_model_len, its
version) and how long a prompt is in the engine's own tokens. Generation requests are sent
elsewhere: the probe's in gate/probe.py, the eval's in engine/client.py.

One rule picks the model card from a /v1/models answer (`pick_card`), for readiness, the engine's
labels and the served limit alike. A router may list a placeholder instead of the model it
serves: sglang-router lists one card named `unknown`, with no max_model_len. NVIDIA Dynamo's
frontend lists `context_window` instead, which is not read as a served limit (engine.dynamo).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import quote

import httpx2

from evalgate.engine import dynamo
from evalgate.engine.retry import EngineAnswerError
from evalgate.engine.urls import redact_url, split_credentials
from evalgate.engine.wire import EngineError, parse_error
from evalgate.lengths import Limit
from evalgate.tasks.prompts import Prompt

log = logging.getLogger(__name__)
SIDE_DOOR_TIMEOUT = 30.0
PLACEHOLDER_MODELS = frozenset({"unknown"})
"""Model ids a router lists when it does not know the served name (sglang-router)."""


def api_root(url: str) -> str:
    """The /v1 base, with no trailing slash (the generation paths go under it)."""
    url = url.rstrip("/")
    for suffix in ("/chat/completions", "/completions"):
        if url.endswith(suffix):
            url = url[: -len(suffix)]
    return url


def server_root(url: str) -> str:
    """The server's root, where /tokenize, /version and /health live."""
    url = api_root(url)
    return url[: -len("/v1")] if url.endswith("/v1") else url


class SideDoorError(EngineAnswerError):
    """An answer that is not the expected JSON (kept internal; callers decide what it means)."""


@dataclass(frozen=True)
class ModelCard:
    """One entry of /v1/models."""

    id: str
    owned_by: str | None
    max_model_len: int | None
    root: str | None
    unreadable_length: object = None
    """A max_model_len the card holds that is not a positive whole number ("9472", -1)."""
    context_window: int | None = None
    """Dynamo's `context_window`: a registered length or the model config's, so not a served
    limit (engine.dynamo)."""


@dataclass(frozen=True)
class TokenCount:
    """What /tokenize said."""

    count: int
    max_model_len: int | None


class EngineInfo:
    """Side-door requests to one server, sharing one connection pool."""

    def __init__(self, url: str, api_key: str | None, timeout: float = SIDE_DOOR_TIMEOUT) -> None:
        self.url, auth = split_credentials(api_root(url))
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx2.Client(timeout=timeout, headers=headers, auth=auth)
        self.notes: list[str] = []
        """Warnings about what the server said (a limit it reports in an unusable form)."""

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> EngineInfo:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _json(
        self,
        method: str,
        url: str,
        body: dict[str, Any] | None = None,
        timeout: float | None = None,
    ) -> Any:
        if timeout is None:
            response = self._client.request(method, url, json=body)
        else:
            response = self._client.request(method, url, json=body, timeout=timeout)
        if response.is_redirect:  # not followed: a redirected engine URL is a wrong --base-url
            where = redact_url(str(response.headers.get("location", "")))
            raise SideDoorError(
                EngineError(response.status_code, f"redirects to {where or 'nowhere said'}")
            )
        if response.status_code != 200:
            raise SideDoorError(parse_error(response.status_code, response.text))
        try:
            return response.json()
        except (json.JSONDecodeError, ValueError) as exc:
            raise SideDoorError(
                EngineError(response.status_code, f"not JSON: {response.text[:200]!r}")
            ) from exc

    def models(self, timeout: float | None = None) -> list[ModelCard]:
        """GET /v1/models (`timeout`: seconds for this request, else the client's)."""
        data = self._json("GET", f"{self.url}/models", timeout=timeout)
        cards = data.get("data") if isinstance(data, dict) else None
        if not isinstance(cards, list):
            raise SideDoorError(EngineError(200, f"/v1/models has no data list: {data!r:.200}"))
        found = []
        for card in cards:
            if isinstance(card, dict) and isinstance(card.get("id"), str):
                length = card.get("max_model_len")
                usable = isinstance(length, int) and not isinstance(length, bool) and length > 0
                found.append(
                    ModelCard(
                        id=card["id"],
                        owned_by=card.get("owned_by")
                        if isinstance(card.get("owned_by"), str)
                        else None,
                        max_model_len=length if usable else None,
                        root=card.get("root") if isinstance(card.get("root"), str) else None,
                        unreadable_length=None if usable else length,
                        context_window=dynamo.context_window(card),
                    )
                )
        return found

    def readiness(self, timeout: float | None = None) -> EngineError | None:
        """GET /readiness, where a router has one: None when it is ready or has none (an
        engine answers 404), else its answer (503 while it has no healthy worker)."""
        url = f"{server_root(self.url)}/readiness"
        if timeout is None:
            response = self._client.get(url)
        else:
            response = self._client.get(url, timeout=timeout)
        if response.status_code < 500:
            return None  # ready, no such door, or elsewhere (a redirect): /v1/models decides
        error = parse_error(response.status_code, response.text)
        return replace(error, message=f"/readiness says {error.message}")

    def model_ready(
        self, model: str, timeout: float | None = None
    ) -> tuple[dynamo.ReadyState, str] | None:
        """GET /v1/models/{model}/ready, Dynamo's readiness of one model, decoded; None where
        the server has no such route."""
        url = f"{self.url}/models/{quote(model, safe='')}/ready"
        if timeout is None:
            response = self._client.get(url)
        else:
            response = self._client.get(url, timeout=timeout)
        return dynamo.ready_answer(response.status_code, response.text)

    def served_limit(self, model: str | None, label: str) -> Limit | None:
        """The served limit of `model` by its /v1/models card (fetched now)."""
        return served_limit(self.models(), model, label, self.notes)

    def version(self) -> str | None:
        """GET /version (vLLM, SGLang); None where the server has none (a router: 405)."""
        try:
            data = self._json("GET", f"{server_root(self.url)}/version")
        except (SideDoorError, httpx2.HTTPError):
            return None
        value = data.get("version") if isinstance(data, dict) else None
        return str(value) if value is not None else None

    def count_tokens(self, model: str, prompt: Prompt) -> TokenCount | None:
        """Tokens of a prompt by the engine's own tokenizer and chat template (POST /tokenize),
        or None when the server has no such endpoint. vLLM also says its max_model_len there;
        behind a prefill/decode router it is the decode worker that answers."""
        body: dict[str, Any] = {"model": model}
        if prompt.messages is not None:
            body["messages"] = list(prompt.messages)
            body["add_generation_prompt"] = True
        else:
            body["prompt"] = prompt.text
        try:
            data = self._json("POST", f"{server_root(self.url)}/tokenize", body)
        except (SideDoorError, httpx2.HTTPError) as exc:
            log.debug("no /tokenize at %s: %s", redact_url(self.url), exc)
            return None
        if not isinstance(data, dict) or not isinstance(data.get("count"), int):
            return None
        limit = data.get("max_model_len")
        return TokenCount(data["count"], limit if isinstance(limit, int) and limit > 0 else None)


def pick_card(cards: list[ModelCard], model: str | None) -> ModelCard | None:
    """The card of `model`; without one by that name, the only card there is (a router's
    placeholder, or the one model an engine serves under another name)."""
    card = next((c for c in cards if c.id == model), None)
    if card is None and len(cards) == 1:
        card = cards[0]
    return card


def is_placeholder(cards: list[ModelCard]) -> bool:
    """Does the list name no model at all (empty, or only placeholders such as `unknown`)?"""
    return all(card.id in PLACEHOLDER_MODELS for card in cards)


def served_limit(
    cards: list[ModelCard], model: str | None, label: str, notes: list[str] | None = None
) -> Limit | None:
    """max_model_len of the picked card, as a Limit from `label`; a length that cannot be read
    is noted in `notes`."""
    card = pick_card(cards, model)
    if card is not None and card.unreadable_length is not None and notes is not None:
        notes.append(
            f"/v1/models of {label} reports max_model_len {card.unreadable_length!r} for "
            f"{card.id}, not a positive whole number: ignored"
        )
    if card is None or card.max_model_len is None:
        return None
    return Limit(card.max_model_len, f"/v1/models of {label}")
