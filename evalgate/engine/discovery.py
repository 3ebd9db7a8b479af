"""An engine's side doors, /readiness, /v1/models, /tokenize and /version: whether an endpoint is
ready, what it serves (its model cards, its max_model_len, its version) and how long a prompt is
in the engine's own tokens. Generation requests are engine/client.py's. Every answer is decoded
into typed values here: a count or a length that is not a positive whole number (-3, `true`,
"9472") is named in `EngineInfo.notes` and not used.

The one rule that picks the model's card (`pick_card`) serves readiness, the engine's labels and
the served limit alike. A router may list a placeholder instead of the model it serves:
sglang-router lists one card named `unknown`, with no max_model_len. NVIDIA Dynamo's frontend
lists `context_window` instead, which is not read as a served limit (engine/answers.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import Any

import aiohttp

from evalgate.engine.answers import whole
from evalgate.engine.http import FAILURES, exchange, open_session, read_capped
from evalgate.engine.urls import Network, api_root, credentials, redact_url, server_root
from evalgate.engine.wire import EngineError, credentials_advice, parse_error
from evalgate.errors import EngineAnswerError
from evalgate.evidence.model import Limit
from evalgate.scrub import capped
from evalgate.tasks.spec import Prompt

PLACEHOLDER_MODELS = frozenset({"unknown"})
"""Model ids a router lists when it does not know the served name (sglang-router)."""


@dataclass(frozen=True)
class ModelCard:
    """One entry of /v1/models."""

    id: str
    owned_by: str | None
    max_model_len: int | None
    unreadable_length: object = None
    """A max_model_len the card holds that is not a positive whole number ("9472", -1)."""
    context_window: int | None = None
    """Dynamo's `context_window`: a registered length or the model config's, so not a served
    limit (engine/answers.py)."""


def model_card(card: Any) -> ModelCard | None:
    """A /v1/models entry, typed: None when it has no id."""
    if not isinstance(card, dict) or not isinstance(card.get("id"), str):
        return None
    length = card.get("max_model_len")
    usable = whole(length, 1)
    owned_by = card.get("owned_by")
    return ModelCard(
        id=card["id"],
        owned_by=owned_by if isinstance(owned_by, str) else None,
        max_model_len=usable,
        unreadable_length=None if usable is not None else length,
        context_window=whole(card.get("context_window"), 1),
    )


def pick_card(cards: list[ModelCard], model: str | None) -> ModelCard | None:
    """The card of `model`; without one by that name, the only card there is (a router's
    placeholder, or the one model an engine serves under another name)."""
    return next((c for c in cards if c.id == model), cards[0] if len(cards) == 1 else None)


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


# The requests, from blocking code.

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TokenCount:
    """What /tokenize said."""

    count: int
    max_model_len: int | None


class EngineInfo:
    """Side-door requests to one server from blocking code, each with a total deadline
    (`timeout`, or the one given) and run by `asyncio.run`, like every blocking call into the
    HTTP layer."""

    def __init__(self, url: str, api_key: str | None, timeout: float, network: Network) -> None:
        self.url, self._headers = credentials(api_root(url), api_key)
        self.timeout = timeout
        self.network = network
        self.notes: list[str] = []
        """Warnings about what the server said (a value it reports in an unusable form)."""

    def answer(
        self,
        method: str,
        url: str,
        body: dict[str, Any] | None = None,
        timeout: float | None = None,
    ) -> tuple[int, str, str | None]:
        """Status, body text and Location of one request."""
        cap = self.network.max_response_bytes

        async def read(response: aiohttp.ClientResponse) -> tuple[int, str, str | None]:
            text = (await read_capped(response, cap)).decode("utf-8", "replace")
            return response.status, text, response.headers.get("location")

        async def send() -> tuple[int, str, str | None]:
            async with open_session(self.network, headers=self._headers) as session:
                return await exchange(
                    session,
                    method,
                    url,
                    deadline=self.timeout if timeout is None else timeout,
                    read=read,
                    data=None if body is None else json.dumps(body).encode(),
                    network=self.network,
                    headers={"Content-Type": "application/json"} if body is not None else None,
                )

        return asyncio.run(send())

    def _json(self, method: str, url: str, **kw: Any) -> Any:
        """The JSON of a 200 answer; any other answer raised as the server's (EngineAnswerError)."""
        status, text, location = self.answer(method, url, **kw)
        if 300 <= status < 400:  # not followed: a redirected engine URL is a wrong --base-url
            where = redact_url(location or "")
            raise EngineAnswerError(EngineError(status, f"redirects to {where or 'nowhere said'}"))
        if status != 200:
            raise EngineAnswerError(parse_error(status, text))
        try:
            return json.loads(text)
        except ValueError as exc:
            raise EngineAnswerError(
                EngineError(status, f"not JSON: {capped(text, 200)!r}")
            ) from exc

    def _refused(self, where: str, exc: BaseException, so: str) -> None:
        """A side door that refused the credentials is noted, not passed over as one that is
        not there: the generation requests will likely be refused too."""
        refused = credentials_advice(exc.error) if isinstance(exc, EngineAnswerError) else None
        if refused is not None:
            self.notes.append(f"{where} answered {exc}: {so}. {refused}")
            log.warning("%s", self.notes[-1])  # now: a context error may follow before the notes

    def models(self, timeout: float | None = None) -> list[ModelCard]:
        """GET /v1/models (`timeout`: seconds for this request, else the client's)."""
        data = self._json("GET", f"{self.url}/models", timeout=timeout)
        cards = data.get("data") if isinstance(data, dict) else None
        if not isinstance(cards, list):
            raise EngineAnswerError(EngineError(200, f"/v1/models has no data list: {data!r:.200}"))
        return [card for card in map(model_card, cards) if card is not None]

    def version(self) -> str | None:
        """GET /version (vLLM, SGLang); None where the server has none (a router: 405)."""
        try:
            data = self._json("GET", f"{server_root(self.url)}/version")
        except FAILURES as exc:
            where = f"/version of {redact_url(server_root(self.url))}"
            self._refused(where, exc, "the engine's version is not recorded")
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
            data = self._json("POST", f"{server_root(self.url)}/tokenize", body=body)
        except FAILURES as exc:
            if not isinstance(exc, EngineAnswerError):  # no such door is normal; this is not
                self.notes.append(f"{where} gave no answer ({exc}): prompt lengths estimated")
            self._refused(where, exc, "prompt lengths estimated")
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
