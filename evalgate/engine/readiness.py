"""Wait, with a deadline, until the endpoint serves the model.

Retried: refused or reset connections, timeouts, 408/429/5xx, and a router's 503 "all circuits
open" / "No available ..." while its workers come up. Not retried: an answer that cannot change
by waiting (401, 404, a model list without the model), which fails at once.
"""

from __future__ import annotations

import logging
import ssl
import time
from collections.abc import Callable

import httpx2
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_delay,
    wait_exponential,
)

from evalgate.engine.discovery import SIDE_DOOR_TIMEOUT, EngineInfo, ModelCard, SideDoorError
from evalgate.engine.urls import redact_url
from evalgate.errors import EndpointError, NotReadyError

log = logging.getLogger(__name__)


def _tls_to_plain_http(exc: BaseException) -> bool:
    """An https:// URL whose server answers plain HTTP: no wait can change that."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLError) and "WRONG_VERSION_NUMBER" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, httpx2.TransportError):
        return not _tls_to_plain_http(exc)
    # A 200 that is not a model list (a server still starting) may become one; a 4xx will not.
    return isinstance(exc, SideDoorError) and (exc.error.retryable or exc.error.status == 200)


def _describe(exc: BaseException | None) -> str:
    if exc is None:
        return "no answer"
    if isinstance(exc, SideDoorError):
        return exc.error.describe()
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _hint(url: str, exc: BaseException) -> str:
    """What to change, from the answer that cannot change by waiting."""
    if _tls_to_plain_http(exc):
        return (
            f"The server did not answer TLS: it speaks plain HTTP, so try "
            f"http://{url.split('://', 1)[1]} as --base-url."
        )
    status = exc.error.status if isinstance(exc, SideDoorError) else None
    if status is not None and 300 <= status < 400:
        return "Give the URL it redirects to (without /models) as --base-url."
    if status == 404 and not url.rstrip("/").endswith("/v1"):
        return f"--base-url does not end in /v1: try {url.rstrip('/')}/v1."
    return "Check --base-url and --api-key."


def wait_until_ready(
    info: EngineInfo,
    model: str | None,
    *,
    timeout: float,
    wait_min: float,
    wait_max: float,
    sleep: Callable[[float], None] = time.sleep,
) -> list[ModelCard]:
    """Poll /v1/models until it answers and lists `model`; return the model cards."""
    url = redact_url(info.url)
    started = time.monotonic()
    deadline = started + timeout

    def progress(state: RetryCallState) -> None:
        outcome = state.outcome
        error = outcome.exception() if outcome is not None else None
        waited = time.monotonic() - started
        log.info("waiting for %s: %s (%.0f s of %.0f s)", url, _describe(error), waited, timeout)

    retrying = Retrying(
        retry=retry_if_exception(_retryable),
        stop=stop_after_delay(timeout),
        wait=wait_exponential(multiplier=wait_min, min=wait_min, max=wait_max),
        before_sleep=progress,
        sleep=sleep,
        reraise=True,
    )
    try:
        # Each attempt gets at most the time left, so a hung server cannot outlast the deadline.
        cards: list[ModelCard] = retrying(
            lambda: info.models(
                timeout=max(0.5, min(SIDE_DOOR_TIMEOUT, deadline - time.monotonic()))
            )
        )
    except (httpx2.HTTPError, SideDoorError) as exc:
        waited = time.monotonic() - started
        if _retryable(exc):
            raise NotReadyError(
                f"{url} was not ready after {waited:.0f} s (--ready-timeout {timeout:g}); last "
                f"answer: {_describe(exc)}. Check that the engines and the router are up, or "
                "raise --ready-timeout."
            ) from exc
        raise EndpointError(f"{url}/models answered {_describe(exc)}. {_hint(url, exc)}") from exc
    ids = [card.id for card in cards]
    if model is not None and model not in ids:
        raise EndpointError(
            f"{url} does not serve model {model!r}; it serves {ids}. Pass --model (MODEL) with "
            "the served model name."
        )
    log.info("%s is ready (%.1f s), serving %s", url, time.monotonic() - started, ids)
    return cards
