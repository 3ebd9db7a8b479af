"""Talking to an engine's side doors: /readiness, /v1/models, /tokenize, /version.

These requests tell evalgate whether an endpoint is ready, what it serves (its max_model_len, its
version) and how long a prompt is in the engine's own tokens. Generation requests, the probe's
and the eval's, are sent by engine/client.py. Every answer is decoded into typed values here:
a count or a length that is not a positive whole number (-3, `true`, "9472") is named in
`EngineInfo.notes` and not used.

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

import aiohttp

from evalgate.engine import dynamo
from evalgate.engine.answers import whole
from evalgate.engine.http import Blocking, Network, exchange, open_session, read_capped
from evalgate.engine.retry import (
    AnswerTooLarge,
    ConnectionFailed,
    EngineAnswerError,
    TransientAnswer,
)
from evalgate.engine.urls import credentials, redact_url
from evalgate.engine.wire import EngineError, parse_error
from evalgate.lengths import Limit
from evalgate.tasks.prompts import Prompt

log = logging.getLogger(__name__)
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


SIDE_DOOR_FAILURES = (SideDoorError, ConnectionFailed, TransientAnswer, AnswerTooLarge)
"""What a side-door request raises when it got no usable answer."""


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


def _card(card: Any) -> ModelCard | None:
    """A /v1/models entry, typed: None when it has no id."""
    if not isinstance(card, dict) or not isinstance(card.get("id"), str):
        return None
    length = card.get("max_model_len")
    usable = whole(length, 1)
    owned_by, root = card.get("owned_by"), card.get("root")
    return ModelCard(
        id=card["id"],
        owned_by=owned_by if isinstance(owned_by, str) else None,
        max_model_len=usable,
        root=root if isinstance(root, str) else None,
        unreadable_length=None if usable is not None else length,
        context_window=dynamo.context_window(card),
    )


class EngineInfo:
    """Side-door requests to one server, sharing one connection pool on one event loop; each
    request has a total deadline (`timeout`, or the one given), first byte to last."""

    def __init__(
        self,
        url: str,
        api_key: str | None,
        timeout: float = 30.0,
        network: Network | None = None,
    ) -> None:
        self.url, self._headers = credentials(api_root(url), api_key)
        self.timeout = timeout
        self.network = network or Network()
        self._loop = Blocking()
        self._session: aiohttp.ClientSession | None = None
        self.notes: list[str] = []
        """Warnings about what the server said (a value it reports in an unusable form)."""

    def close(self) -> None:
        session = self._session
        self._loop.close(session.close() if session is not None else None)

    def __enter__(self) -> EngineInfo:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def _request(
        self, method: str, url: str, body: dict[str, Any] | None, timeout: float | None
    ) -> tuple[int, str, str | None]:
        if self._session is None:
            self._session = open_session(self.network, headers=self._headers)
        cap = self.network.max_response_bytes

        async def read(response: aiohttp.ClientResponse) -> tuple[int, str, str | None]:
            text = (await read_capped(response, cap)).decode("utf-8", "replace")
            return response.status, text, response.headers.get("location")

        return await exchange(
            self._session,
            method,
            url,
            deadline=self.timeout if timeout is None else timeout,
            read=read,
            data=None if body is None else json.dumps(body).encode(),
            network=self.network,
            headers={"Content-Type": "application/json"} if body is not None else None,
        )

    def _answer(
        self,
        method: str,
        url: str,
        body: dict[str, Any] | None = None,
        timeout: float | None = None,
    ) -> tuple[int, str, str | None]:
        """Status, body text and Location of one request."""
        return self._loop.run(self._request(method, url, body, timeout))

    def _json(
        self,
        method: str,
        url: str,
        body: dict[str, Any] | None = None,
        timeout: float | None = None,
    ) -> Any:
        status, text, location = self._answer(method, url, body, timeout)
        if 300 <= status < 400:  # not followed: a redirected engine URL is a wrong --base-url
            where = redact_url(location or "")
            raise SideDoorError(EngineError(status, f"redirects to {where or 'nowhere said'}"))
        if status != 200:
            raise SideDoorError(parse_error(status, text))
        try:
            return json.loads(text)
        except ValueError as exc:
            raise SideDoorError(EngineError(status, f"not JSON: {text[:200]!r}")) from exc

    def models(self, timeout: float | None = None) -> list[ModelCard]:
        """GET /v1/models (`timeout`: seconds for this request, else the client's)."""
        data = self._json("GET", f"{self.url}/models", timeout=timeout)
        cards = data.get("data") if isinstance(data, dict) else None
        if not isinstance(cards, list):
            raise SideDoorError(EngineError(200, f"/v1/models has no data list: {data!r:.200}"))
        return [card for card in map(_card, cards) if card is not None]

    def readiness(self, timeout: float | None = None) -> EngineError | None:
        """GET /readiness, where a router has one: None when it is ready or has none (an
        engine answers 404), else its answer (503 while it has no healthy worker)."""
        status, text, _ = self._answer("GET", f"{server_root(self.url)}/readiness", None, timeout)
        if status < 500:
            return None  # ready, no such door, or elsewhere (a redirect): /v1/models decides
        error = parse_error(status, text)
        return replace(error, message=f"/readiness says {error.message}")

    def model_ready(
        self, model: str, timeout: float | None = None
    ) -> tuple[dynamo.ReadyState, str] | None:
        """GET /v1/models/{model}/ready, Dynamo's readiness of one model, decoded; None where
        the server has no such route."""
        url = f"{self.url}/models/{quote(model, safe='')}/ready"
        status, text, _ = self._answer("GET", url, None, timeout)
        return dynamo.ready_answer(status, text)

    def served_limit(self, model: str | None, label: str) -> Limit | None:
        """The served limit of `model` by its /v1/models card (fetched now)."""
        return served_limit(self.models(), model, label, self.notes)

    def version(self) -> str | None:
        """GET /version (vLLM, SGLang); None where the server has none (a router: 405)."""
        try:
            data = self._json("GET", f"{server_root(self.url)}/version")
        except SIDE_DOOR_FAILURES as exc:
            log.debug("no /version at %s: %s", redact_url(self.url), exc)
            return None
        value = data.get("version") if isinstance(data, dict) else None
        if value is not None and not isinstance(value, str):
            self.notes.append(
                f"/version of {redact_url(self.url)} reports version {value!r:.80}, not text: "
                "ignored"
            )
            return None
        return value

    def count_tokens(self, model: str, prompt: Prompt) -> TokenCount | None:
        """Tokens of a prompt by the engine's own tokenizer and chat template (POST /tokenize),
        or None when the server has no such endpoint or says something implausible (noted).
        vLLM also says its max_model_len there; behind a prefill/decode router it is the
        decode worker that answers."""
        body: dict[str, Any] = {"model": model}
        if prompt.messages is not None:
            body["messages"] = list(prompt.messages)
            body["add_generation_prompt"] = True
        else:
            body["prompt"] = prompt.text
        where = f"/tokenize of {redact_url(server_root(self.url))}"
        try:
            data = self._json("POST", f"{server_root(self.url)}/tokenize", body)
        except SIDE_DOOR_FAILURES as exc:
            if not isinstance(exc, SideDoorError):  # no such door is normal; this is not
                self.notes.append(f"{where} gave no answer ({exc}): prompt lengths estimated")
            log.debug("no %s: %s", where, exc)
            return None
        found = data.get("count") if isinstance(data, dict) else None
        count = whole(found, 1)
        if count is None:
            self.notes.append(
                f"{where} reports count {found!r:.80}, not a whole number of tokens above 0: "
                "ignored, prompt lengths estimated"
            )
            return None
        limit = data.get("max_model_len")
        if limit is not None and whole(limit, 1) is None:
            self.notes.append(
                f"{where} reports max_model_len {limit!r:.80}, not a positive whole number: ignored"
            )
        return TokenCount(count, whole(limit, 1))


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


def worker_limit(
    url: str,
    model: str | None,
    api_key: str | None,
    *,
    timeout: float,
    network: Network,
    notes: list[str],
) -> Limit | None:
    """The served limit on a worker's /v1/models card; what it reports unusably goes to
    `notes`. Raises one of SIDE_DOOR_FAILURES when the worker gives no model list."""
    with EngineInfo(url, api_key, timeout, network) as info:
        limit = info.served_limit(model, f"worker {redact_url(url)}")
        notes += info.notes
    return limit
