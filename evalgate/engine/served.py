"""What the engines serve, asked once before the eval: the endpoint waited for, with a deadline,
until it serves the model; its card's limit and each --worker-url's, the longest prompts in the
engine's own tokens, and its version. The facts the context is derived from (context/limits.py),
as plain values; the endpoint the settings describe enters the engine here (engine.urls.Endpoint).

What each readiness check asks, what is retried and what fails at once (401, 404, a model list
naming other models: waiting cannot change them): docs/run.md, "Readiness, then the probe";
behind Dynamo's frontend: docs/harness.md, "What evalgate does with it".
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING
from urllib.parse import quote

from tenacity import RetryCallState

from evalgate.engine import answers
from evalgate.engine.discovery import EngineInfo, ModelCard, is_placeholder, pick_card, served_limit
from evalgate.engine.http import FAILURES, RetryPolicy, should_retry, tls_to_plain_http
from evalgate.engine.urls import Endpoint, redact_url, server_root
from evalgate.engine.wire import EngineError, credentials_advice, parse_error
from evalgate.errors import (
    AnswerTooLarge,
    EndpointError,
    EngineAnswerError,
    NotReadyError,
    TransientAnswer,
)
from evalgate.evidence.model import EndpointRecord, EngineRecord, Limit, Stage
from evalgate.scrub import listed

if TYPE_CHECKING:
    from evalgate.engine.discovery import TokenCount
    from evalgate.tasks.spec import Prompt

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Readiness:
    """What the endpoint said once it was ready."""

    cards: list[ModelCard]
    """Its /v1/models, as listed."""
    card: ModelCard | None
    """The card of the model (engine.discovery.pick_card)."""
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
    answer = answers.ready_answer(*info.answer("GET", url, timeout=timeout)[:2])
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


# The survey, once the endpoint is ready.


@dataclass(frozen=True)
class Served:
    """What the engines said, before any of it is weighed."""

    limits: list[Limit] = field(default_factory=list)
    """The limits the engines serve, with their sources: the endpoint's card, each worker's."""
    counts: list[tuple[TokenCount, Prompt]] = field(default_factory=list)
    """Each candidate prompt in the engine's tokens (POST /tokenize): all of them, or none."""
    notes: list[str] = field(default_factory=list)
    """What the result's warnings say of them: readiness, values that could not be read."""
    engine: EngineRecord | None = None
    """What the endpoint said it is (None: there was no endpoint to ask)."""
    unread_window: str | None = None
    """Dynamo's context_window, said when nothing else limits the context (answers.py)."""


def record(endpoint: Endpoint, engine: EngineRecord | None = None) -> EndpointRecord:
    """Where the engine was (credentials removed) and what it said it is."""
    return EndpointRecord(
        base_url=redact_url(endpoint.base_url) if endpoint.base_url else None,
        api=endpoint.api,
        worker_urls=[redact_url(url) for url in endpoint.worker_urls],
        engine=engine or EngineRecord(),
    )


def survey(
    endpoint: Endpoint,
    candidates: Sequence[Prompt],
    on_stage: Callable[[Stage], None] = lambda stage: None,
) -> Served:
    """Readiness (when there is an endpoint), then what the engines serve and how long the
    candidate prompts are in their tokens."""
    network, model = endpoint.network, endpoint.served_model
    limits: list[Limit] = []
    notes: list[str] = []
    info, engine, unread = None, None, None
    if endpoint.base_url is not None:
        on_stage("readiness")
        policy = RetryPolicy.for_readiness(
            timeout=network.ready_timeout,
            wait_min=network.retry_wait_min,
            wait_max=network.retry_wait_max,
        )
        # A side-door answer, whole, within --discovery-timeout and never past --ready-timeout.
        timeout = max(0.5, min(network.discovery_timeout, network.ready_timeout))
        info = EngineInfo(endpoint.base_url, endpoint.key, timeout, network)
        ready = wait_until_ready(info, model, policy=policy)
        notes += ready.warnings
        card = ready.card
        engine = EngineRecord(owned_by=card.owned_by if card else None, version=info.version())
        on_stage("context")
        stated = served_limit(ready.cards, model, "the endpoint", info.notes)
        limits += [stated] if stated else []
        if card and card.context_window is not None and card.max_model_len is None:
            unread = answers.context_window_note(card.context_window, card.id, "the endpoint")
    else:
        on_stage("context")
    workers: list[str] = []
    limits += _workers(endpoint, workers)
    counts = counted(info, model, candidates) if info is not None else []
    notes += [*(info.notes if info is not None else []), *workers]
    return Served(limits, counts, notes, engine, unread)


def _workers(endpoint: Endpoint, notes: list[str]) -> list[Limit]:
    """Every --worker-url's served limit (its /v1/models): the user named the worker because
    its limit matters, so one that does not answer is an error."""
    found = []
    network = endpoint.network
    for url in endpoint.worker_urls:
        label = redact_url(url)
        try:
            cards = EngineInfo(url, endpoint.key, network.discovery_timeout, network).models()
            limit = served_limit(cards, endpoint.served_model, f"worker {label}", notes)
        except FAILURES as exc:
            refused = credentials_advice(exc.error) if isinstance(exc, EngineAnswerError) else None
            raise EndpointError(
                f"Worker {label} did not answer /v1/models ({exc}). "
                + (
                    refused
                    or "Check --worker-url, or give its limit with --server-config / "
                    "--served-max-model-len instead."
                )
            ) from exc
        if limit is None:
            log.warning("worker %s reports no max_model_len", label)
        else:
            found.append(limit)
    return found


def counted(
    info: EngineInfo, model: str | None, candidates: Sequence[Prompt]
) -> list[tuple[TokenCount, Prompt]]:
    """Each candidate in the engine's tokens (POST /tokenize), or none when one cannot be."""
    found: list[tuple[TokenCount, Prompt]] = []
    if model is None:
        return found
    for prompt in candidates:
        count = info.count_tokens(model, prompt)
        if count is None:
            return []
        found.append((count, prompt))
    return found
