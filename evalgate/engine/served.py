"""What the engines serve, asked once before the eval: the endpoint waited for until it serves
the model, its card's limit and each --worker-url's, the longest prompts in the engine's own
tokens, and its version. The facts the context is derived from (gate/limits.py), as plain
values; the endpoint the settings describe enters the engine here (engine.urls.Endpoint).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from evalgate.engine import dynamo
from evalgate.engine.cards import served_limit
from evalgate.engine.retry import FAILURES, RetryPolicy
from evalgate.engine.urls import Endpoint, redact_url
from evalgate.engine.wire import credentials_advice
from evalgate.errors import EndpointError, EngineAnswerError
from evalgate.evidence.fields import Stage
from evalgate.evidence.stage_records import EndpointRecord, EngineRecord
from evalgate.lengths import Limit

if TYPE_CHECKING:  # the HTTP client loads only when there is an engine to ask
    from evalgate.engine.discovery import EngineInfo, TokenCount
    from evalgate.tasks.prompts import Prompt

log = logging.getLogger(__name__)


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
    """Dynamo's context_window, said when nothing else limits the context (dynamo.py)."""


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
        from evalgate.engine.discovery import EngineInfo  # the HTTP client loads only now
        from evalgate.engine.readiness import wait_until_ready

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
        listed = served_limit(ready.cards, model, "the endpoint", info.notes)
        limits += [listed] if listed else []
        if card and card.context_window is not None and card.max_model_len is None:
            unread = dynamo.context_window_note(card.context_window, card.id, "the endpoint")
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
        from evalgate.engine.discovery import EngineInfo  # loads the client

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
