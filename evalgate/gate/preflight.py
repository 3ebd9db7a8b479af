"""Before the eval: wait for the endpoint, derive the context, send the probe.

Shared by `evalgate context`, `evalgate probe` and `evalgate run`, so the three can never
disagree about a number.

Behind NVIDIA Dynamo's frontend (engine.dynamo): its `context_window` is not read as a served
limit, with a warning when nothing else gives one; a probe it rejects without the engine's words
("Bad Request") is sent again to each --worker-url directly, for the engine's own words.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from evalgate.engine import dynamo
from evalgate.engine.cards import ModelCard, served_limit
from evalgate.engine.retry import RetryPolicy
from evalgate.engine.urls import redact_url
from evalgate.errors import ProbeError, UsageError
from evalgate.evidence.fields import Stage
from evalgate.gate.context import EvalContext
from evalgate.gate.limits import gather_context
from evalgate.settings.stages import ContextAsk, Endpoint
from evalgate.tasks.prompts import Prompt, longest_candidates

if TYPE_CHECKING:  # the probe module (and the eval's client) loads when the probe is sent
    from evalgate.gate.probe import ProbeOutcome

PROBE_TIMEOUT = 60.0
"""Seconds the probe may take to its first event, first byte to last (capped by --timeout)."""


@dataclass(frozen=True)
class Engine:
    """What the endpoint said about itself."""

    owned_by: str | None
    version: str | None


def derive(
    ask: ContextAsk,
    endpoint: Endpoint,
    prompts: Sequence[Prompt],
    on_stage: Callable[[Stage], None] = lambda stage: None,
) -> tuple[EvalContext, Prompt, Engine | None]:
    """Readiness (when there is an endpoint), then the context and the prompt to probe with."""
    candidates = longest_candidates(prompts)
    if endpoint.base_url is None:
        on_stage("context")
        context, longest = gather_context(
            ask, endpoint, endpoint_limit=None, info=None, candidates=candidates
        )
        return context, longest, None
    from evalgate.engine.discovery import EngineInfo  # the HTTP client loads only now
    from evalgate.engine.readiness import wait_until_ready

    on_stage("readiness")
    policy = RetryPolicy.for_readiness(
        timeout=endpoint.ready_timeout,
        wait_min=endpoint.retry_wait_min,
        wait_max=endpoint.retry_wait_max,
    )
    # A side-door answer, whole, within --discovery-timeout and never past --ready-timeout.
    timeout = max(0.5, min(endpoint.discovery_timeout, endpoint.ready_timeout))
    with EngineInfo(endpoint.base_url, endpoint.api_key, timeout, endpoint.network) as info:
        ready = wait_until_ready(info, endpoint.served_model, policy=policy)
        engine = Engine(ready.card.owned_by if ready.card else None, info.version())
        on_stage("context")
        # The model list of the readiness check, not a second one: the same card decides.
        endpoint_limit = served_limit(
            ready.cards, endpoint.served_model, "the endpoint", info.notes
        )
        context, longest = gather_context(
            ask,
            endpoint,
            endpoint_limit=endpoint_limit,
            info=info,
            candidates=candidates,
            unread_limit=_unread_window(ready.card),
        )
    if ready.warnings:
        context = replace(context, warnings=(*ready.warnings, *context.warnings))
    return context, longest, engine


_Request = tuple[EvalContext, Prompt, list[str], Mapping[str, Any] | None]
"""The probe's context, prompt, stop strings and sampling."""


def _unread_window(card: ModelCard | None) -> str | None:
    """The warning for a Dynamo card's context_window, which is not read as a served limit."""
    if card is None or card.context_window is None or card.max_model_len is not None:
        return None
    return dynamo.context_window_note(card.context_window, card.id, "the endpoint")


def probe(
    endpoint: Endpoint,
    context: EvalContext,
    prompt: Prompt,
    stop: list[str],
    sampling: Mapping[str, Any] | None = None,
) -> ProbeOutcome:
    """The pre-flight request at the real budget, with the task's stops and sampling, sent by
    the eval's own client."""
    timeout = min(endpoint.timeout, PROBE_TIMEOUT)
    client = eval_client(endpoint, timeout=timeout, max_connections=1)
    try:
        return _send_probe(endpoint, client, (context, prompt, stop, sampling), strict=True)
    except ProbeError as exc:
        if exc.engine_error is None or not dynamo.wordless(exc.engine_error):
            raise
        found = _with_engine_words(exc, endpoint, client, (context, prompt, stop, sampling))
        raise found from exc


def _send_probe(
    endpoint: Endpoint, client: dict[str, Any], args: _Request, *, strict: bool
) -> ProbeOutcome:
    """The probe sent by an EvalClient made of `client` (its keyword arguments); `strict`
    False: a truncation risk is only warned about (a worker asked for its words)."""
    from evalgate.engine.client import send_probe
    from evalgate.gate.probe import run_probe

    context, prompt, stop, sampling = args
    return run_probe(
        lambda body: send_probe(body, **client),
        prompt,
        context,
        model=str(endpoint.served_model),
        api=endpoint.api,
        stop=stop,
        sampling=sampling,
        strict=endpoint.strict and strict,
        timeout=client["timeout"],
        endpoint=redact_url(client["base_url"]),
    )


def _with_engine_words(
    rejected: ProbeError,
    endpoint: Endpoint,
    client: dict[str, Any],
    args: _Request,
) -> ProbeError:
    """A probe Dynamo's frontend rejected without the engine's words, told with the words of a
    worker asked the same request directly (once each), or how to get them."""
    for url in endpoint.worker_urls:
        label = redact_url(url)
        try:
            worker = {**client, "base_url": url, "attempts": 1}
            _send_probe(endpoint, worker, args, strict=False)
        except ProbeError as answer:
            error = answer.engine_error
            if error is not None and not dynamo.wordless(error):
                found = ProbeError(
                    f"{rejected.message} The worker {label} answers the same request itself: "
                    f"{error.describe()}."
                )
                found.engine_error = error
                return found
            continue
        found = ProbeError(
            f"{rejected.message} The worker {label} accepts the same request itself: the "
            "rejection is the frontend's own; its log says why."
        )
        found.engine_error = rejected.engine_error
        return found
    asked = "No --worker-url worker answered the same request with words either."
    then = asked if endpoint.worker_urls else dynamo.ASK_WORKERS
    found = ProbeError(f"{rejected.message} {dynamo.NO_WORDS} {then}")
    found.engine_error = rejected.engine_error
    return found


def eval_client(endpoint: Endpoint, *, timeout: float, max_connections: int) -> dict[str, Any]:
    """The keyword arguments of the EvalClient that sends the probe and the eval."""
    if (
        endpoint.base_url is None or endpoint.served_model is None
    ):  # run and probe require both first
        raise UsageError(
            "Missing --base-url or --model: set the flag or its variable (see --help)."
        )
    return {
        "base_url": endpoint.base_url,
        "api_key": endpoint.api_key,
        "api": endpoint.api,
        "timeout": timeout,
        "attempts": endpoint.max_attempts,
        "wait_min": endpoint.retry_wait_min,
        "wait_max": endpoint.retry_wait_max,
        "max_connections": max_connections,
        "network": endpoint.network,
    }
