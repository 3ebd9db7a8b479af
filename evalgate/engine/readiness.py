"""Wait, with a deadline, until the endpoint serves the model.

What each check asks, what is retried and what fails at once (401, 404, a model list naming
other models: waiting cannot change them): docs/run.md, "Readiness, then the probe"; behind
Dynamo's frontend: docs/harness.md, "What evalgate does with it".
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from urllib.parse import quote

from tenacity import RetryCallState

from evalgate.engine import dynamo
from evalgate.engine.cards import ModelCard, is_placeholder, pick_card
from evalgate.engine.discovery import EngineInfo
from evalgate.engine.retry import FAILURES, RetryPolicy, should_retry, tls_to_plain_http
from evalgate.engine.urls import redact_url, server_root
from evalgate.engine.wire import EngineError, credentials_advice, parse_error
from evalgate.errors import (
    AnswerTooLarge,
    EndpointError,
    EngineAnswerError,
    NotReadyError,
    TransientAnswer,
)
from evalgate.outside import listed

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Readiness:
    """What the endpoint said once it was ready."""

    cards: list[ModelCard]
    """Its /v1/models, as listed."""
    card: ModelCard | None
    """The card of the model (engine.cards.pick_card)."""
    warnings: tuple[str, ...] = ()


def _describe(exc: BaseException | None) -> str:
    if exc is None:
        return "no answer"
    return str(exc) or type(exc).__name__  # evalgate's errors say what happened (describe())


def _hint(url: str, exc: BaseException) -> str:
    """What to change, from the answer that cannot change by waiting."""
    if tls_to_plain_http(exc):
        return (
            f"The server did not answer TLS: it speaks plain HTTP, so try "
            f"http://{url.split('://', 1)[1]} as --base-url."
        )
    if isinstance(exc, AnswerTooLarge):
        return (
            "A model list is a few kilobytes: check that --base-url points at the engine or "
            "router, or raise --max-response-bytes."
        )
    error = exc.error if isinstance(exc, EngineAnswerError) else None
    refused = credentials_advice(error) if error is not None else None
    if refused is not None:
        return refused
    status = error.status if error is not None else None
    if status is not None and 300 <= status < 400:
        return "Give the URL it redirects to (without /models) as --base-url."
    if status == 404 and not url.rstrip("/").endswith("/v1"):
        return f"--base-url does not end in /v1: try {url.rstrip('/')}/v1."
    return "Check --base-url and --api-key."


def _check(info: EngineInfo, model: str | None, deadline: float) -> list[ModelCard]:
    """One check: /readiness (where there is one), then /v1/models, then Dynamo's readiness of
    the model where the list is Dynamo's or empty; each request whole within the side-door
    timeout and the time left (a hung or trickling server cannot outlast it)."""

    def left() -> float:
        return max(0.5, min(info.timeout, deadline - time.monotonic()))

    # A router's /readiness answers 503 while it has no healthy worker; ready, no such door (an
    # engine answers 404) or elsewhere (a redirect): /v1/models decides.
    status, text, _ = info.answer("GET", f"{server_root(info.url)}/readiness", timeout=left())
    if status >= 500:
        error = parse_error(status, text)
        raise EngineAnswerError(replace(error, message=f"/readiness says {error.message}"))
    cards = info.models(timeout=left())
    if model is not None and (not cards or any(c.context_window for c in cards)):
        _dynamo_check(info, model, cards, left())
    return cards


def _dynamo_check(info: EngineInfo, model: str, cards: list[ModelCard], timeout: float) -> None:
    """Raise what can change by waiting: Dynamo says the model is not ready, or lists no model
    because no worker has registered one yet."""
    url = f"{info.url}/models/{quote(model, safe='')}/ready"
    answer = dynamo.ready_answer(*info.answer("GET", url, timeout=timeout)[:2])
    if answer is None:
        return  # not Dynamo: /v1/models decides
    state, reason = answer
    path = f"/v1/models/{model}/ready"
    if state == "not ready":
        raise EngineAnswerError(EngineError(503, f"{path} says not ready: {reason}"))
    if state == "unlisted" and not cards:
        raise TransientAnswer(
            f"Dynamo's frontend lists no model yet ({path}: 404 {reason}): no worker has "
            "registered one"
        )


def wait_until_ready(
    info: EngineInfo,
    model: str | None,
    *,
    policy: RetryPolicy,
) -> Readiness:
    """Check until the endpoint is ready and lists `model` (or only a placeholder)."""
    url = redact_url(info.url)
    timeout = policy.deadline if policy.deadline is not None else info.timeout
    started = time.monotonic()
    deadline = started + timeout

    def progress(state: RetryCallState) -> None:
        outcome = state.outcome
        error = outcome.exception() if outcome is not None else None
        waited = time.monotonic() - started
        log.info("waiting for %s: %s (%.0f s of %.0f s)", url, _describe(error), waited, timeout)

    try:
        cards: list[ModelCard] = policy.retrying(before_sleep=progress)(
            lambda: _check(info, model, deadline)
        )
    except FAILURES as exc:
        waited = time.monotonic() - started
        if should_retry(exc):
            raise NotReadyError(
                f"{url} was not ready after {waited:.0f} s (--ready-timeout {timeout:g}); last "
                f"answer: {_describe(exc)}. Check that the engines and the router are up, or "
                "raise --ready-timeout."
            ) from exc
        raise EndpointError(f"{url}/models answered {_describe(exc)}. {_hint(url, exc)}") from exc
    ids = listed([card.id for card in cards])  # a list of 10^5 names is not one line to print
    card = pick_card(cards, model)
    warnings: list[str] = []
    if model is not None and (card is None or card.id != model):
        if not is_placeholder(cards):
            raise EndpointError(
                f"{url} does not serve model {model!r}; it serves {ids}. Pass --model (MODEL) "
                "with the served model name."
            )
        warnings.append(
            f"{url}/models does not name the model: it lists {ids} (a router that does not "
            f"know the served name); the probe proves {model!r}, and the served limit must "
            "come from /tokenize, --worker-url, --server-config or --served-max-model-len"
        )
        log.warning("%s", warnings[-1])
    log.info("%s is ready (%.1f s), serving %s", url, time.monotonic() - started, ids)
    return Readiness(cards, card, tuple(warnings))
