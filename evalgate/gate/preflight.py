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
from evalgate.engine.discovery import EngineInfo, ModelCard, api_root, served_limit
from evalgate.engine.readiness import wait_until_ready
from evalgate.engine.retry import RetryPolicy
from evalgate.engine.urls import authorization, redact_url
from evalgate.errors import ProbeError, UsageError
from evalgate.evidence.model import Stage
from evalgate.gate.context import EvalContext
from evalgate.gate.limits import gather_context
from evalgate.settings import Settings
from evalgate.tasks.prompts import Prompt, longest_candidates

if TYPE_CHECKING:  # the probe module (and its HTTP client) loads when the probe is sent
    import httpx2

    from evalgate.gate.probe import ProbeOutcome

PROBE_TIMEOUT = 60.0
"""Seconds the probe waits for its first token (capped by --timeout)."""


@dataclass(frozen=True)
class Engine:
    """What the endpoint said about itself."""

    owned_by: str | None
    version: str | None


def api_key(settings: Settings) -> str | None:
    """The secret, for the one place that sends it."""
    return settings.api_key.get_secret_value() if settings.api_key else None


def require(settings: Settings, *names: str) -> None:
    """Fail with one message naming every missing setting."""
    missing = [n for n in names if getattr(settings, n) in (None, "", [])]
    if missing:
        flags = ", ".join("--" + n.replace("_", "-") for n in missing)
        raise UsageError(
            f"Missing {flags}: set the flag(s) or the matching environment variable(s) "
            "(see --help)."
        )


def target(settings: Settings) -> tuple[str, str]:
    """The base URL and the served model name, which every request needs."""
    require(settings, "base_url", "model")
    return str(settings.base_url), str(settings.served_model)


def derive(
    settings: Settings,
    prompts: Sequence[Prompt],
    on_stage: Callable[[Stage], None] = lambda stage: None,
) -> tuple[EvalContext, Prompt, Engine | None]:
    """Readiness (when there is an endpoint), then the context and the prompt to probe with."""
    key = api_key(settings)
    candidates = longest_candidates(prompts)
    if settings.base_url is None:
        on_stage("context")
        context, longest = gather_context(
            settings, endpoint_limit=None, info=None, candidates=candidates, api_key=key
        )
        return context, longest, None
    on_stage("readiness")
    policy = RetryPolicy.for_readiness(
        timeout=settings.ready_timeout,
        wait_min=settings.retry_wait_min,
        wait_max=settings.retry_wait_max,
    )
    with EngineInfo(settings.base_url, key) as info:
        ready = wait_until_ready(info, settings.served_model, policy=policy)
        engine = Engine(ready.card.owned_by if ready.card else None, info.version())
        on_stage("context")
        # The model list of the readiness check, not a second one: the same card decides.
        endpoint_limit = served_limit(
            ready.cards, settings.served_model, "the endpoint", info.notes
        )
        context, longest = gather_context(
            settings,
            endpoint_limit=endpoint_limit,
            info=info,
            candidates=candidates,
            api_key=key,
            unread_limit=_unread_window(ready.card),
        )
    if ready.warnings:
        context = replace(context, warnings=(*ready.warnings, *context.warnings))
    return context, longest, engine


def _unread_window(card: ModelCard | None) -> str | None:
    """The warning for a Dynamo card's context_window, which is not read as a served limit."""
    if card is None or card.context_window is None or card.max_model_len is not None:
        return None
    return dynamo.context_window_note(card.context_window, card.id, "the endpoint")


def _client(url: str, key: str | None, timeout: float) -> httpx2.Client:
    """The probe's HTTP client for one OpenAI base URL."""
    import httpx2

    from evalgate.engine import request

    bare, header = authorization(api_root(url), key)
    return httpx2.Client(base_url=bare + "/", headers=request.headers(header), timeout=timeout)


def probe(
    settings: Settings,
    context: EvalContext,
    prompt: Prompt,
    stop: list[str],
    sampling: Mapping[str, Any] | None = None,
) -> ProbeOutcome:
    """The pre-flight request at the real budget, with the task's stops and sampling."""
    from evalgate.gate.probe import run_probe

    base_url, model = target(settings)
    timeout = min(settings.timeout, PROBE_TIMEOUT)
    options: dict[str, Any] = {
        "model": model,
        "api": settings.api,
        "stop": stop,
        "sampling": sampling,
        "wait_min": settings.retry_wait_min,
        "wait_max": settings.retry_wait_max,
        "timeout": timeout,
    }
    with _client(base_url, api_key(settings), timeout) as client:
        try:
            return run_probe(
                client,
                prompt,
                context,
                strict=settings.strict,
                attempts=settings.max_attempts,
                **options,
            )
        except ProbeError as exc:
            if exc.engine_error is None or not dynamo.wordless(exc.engine_error):
                raise
            args = (prompt, context)
            worded = _with_engine_words(exc, settings.worker_urls, api_key(settings), args, options)
            raise worded from exc


def _with_engine_words(
    rejected: ProbeError,
    worker_urls: Sequence[str],
    key: str | None,
    args: tuple[Prompt, EvalContext],
    options: dict[str, Any],
) -> ProbeError:
    """A probe Dynamo's frontend rejected without the engine's words, told with the words of a
    worker asked the same request directly (once each), or how to get them."""
    from evalgate.gate.probe import run_probe

    for url in worker_urls:
        label = redact_url(url)
        try:
            with _client(url, key, options["timeout"]) as client:
                run_probe(client, *args, strict=False, attempts=1, **options)
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
    found = ProbeError(
        f"{rejected.message} {dynamo.NO_WORDS} {asked if worker_urls else dynamo.ASK_WORKERS}"
    )
    found.engine_error = rejected.engine_error
    return found
