"""Before the eval: wait for the endpoint, derive the context, send the probe.

Shared by `evalgate context`, `evalgate probe` and `evalgate run`, so the three can never
disagree about a number.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from evalgate.engine.discovery import EngineInfo, served_limit
from evalgate.engine.http import Network
from evalgate.engine.readiness import wait_until_ready
from evalgate.engine.retry import RetryPolicy
from evalgate.engine.urls import redact_url
from evalgate.errors import UsageError
from evalgate.evidence.model import Stage
from evalgate.gate.context import EvalContext
from evalgate.gate.limits import gather_context
from evalgate.settings import Settings
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
            settings,
            endpoint_limit=None,
            info=None,
            candidates=candidates,
            api_key=key,
            network=network(settings),
        )
        return context, longest, None
    on_stage("readiness")
    policy = RetryPolicy.for_readiness(
        timeout=settings.ready_timeout,
        wait_min=settings.retry_wait_min,
        wait_max=settings.retry_wait_max,
    )
    # A side-door answer, whole, within --discovery-timeout and never past --ready-timeout.
    timeout = max(0.5, min(settings.discovery_timeout, settings.ready_timeout))
    with EngineInfo(settings.base_url, key, timeout, network(settings)) as info:
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
            network=info.network,
        )
    if ready.warnings:
        context = replace(context, warnings=(*ready.warnings, *context.warnings))
    return context, longest, engine


def probe(
    settings: Settings,
    context: EvalContext,
    prompt: Prompt,
    stop: list[str],
    sampling: Mapping[str, Any] | None = None,
) -> ProbeOutcome:
    """The pre-flight request at the real budget, with the task's stops and sampling, sent by
    the eval's own client."""
    from evalgate.engine.client import send_probe
    from evalgate.gate.probe import run_probe

    base_url, model = target(settings)
    timeout = min(settings.timeout, PROBE_TIMEOUT)
    client = eval_client(settings, timeout=timeout, max_connections=1)
    return run_probe(
        lambda body: send_probe(body, **client),
        prompt,
        context,
        model=model,
        api=settings.api,
        stop=stop,
        sampling=sampling,
        strict=settings.strict,
        timeout=timeout,
        endpoint=redact_url(base_url),
    )


def network(settings: Settings) -> Network:
    """What every connection to the engine, the router and the workers is given."""
    return Network(
        connect_timeout=settings.connect_timeout,
        keepalive_idle=settings.keepalive_idle,
        keepalive_interval=settings.keepalive_interval,
        keepalive_probes=settings.keepalive_probes,
        max_response_bytes=settings.max_response_bytes,
    )


def eval_client(settings: Settings, *, timeout: float, max_connections: int) -> dict[str, Any]:
    """The keyword arguments of the EvalClient that sends the probe and the eval."""
    base_url, _ = target(settings)
    return {
        "base_url": base_url,
        "api_key": api_key(settings),
        "api": settings.api,
        "timeout": timeout,
        "attempts": settings.max_attempts,
        "wait_min": settings.retry_wait_min,
        "wait_max": settings.retry_wait_max,
        "max_connections": max_connections,
        "network": network(settings),
    }
