"""The one retry policy for every request evalgate sends an engine: readiness, probe and eval.

Retry only what can succeed later, with attempts and total time both bounded; a 4xx is the
engine's answer, not a glitch. What is retried and the bounds: RELIABILITY.md, the rules.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_any,
    stop_before_delay,
    stop_never,
    wait_exponential,
)
from tenacity.stop import stop_base

from evalgate.errors import (
    AnswerTooLarge,
    ConnectionFailed,
    EngineAnswerError,
    HostSilent,
    TransientAnswer,
)

BeforeSleep = Callable[[RetryCallState], None]


FAILURES = (EngineAnswerError, ConnectionFailed, TransientAnswer, AnswerTooLarge)
"""What a request raises when it got no usable answer."""


def causes(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and the errors it was raised from or while handling, innermost last."""
    seen: BaseException | None = exc
    while seen is not None:
        yield seen
        seen = seen.__cause__ or seen.__context__


def tls_to_plain_http(exc: BaseException) -> bool:
    """An https:// URL whose server answers plain HTTP: no wait can change that."""
    return any(
        isinstance(seen, ssl.SSLError) and "WRONG_VERSION_NUMBER" in str(seen)
        for seen in causes(exc)
    )


def should_retry(exc: BaseException) -> bool:
    """Can the same request succeed later? (The table in the module docstring.)"""
    if isinstance(exc, EngineAnswerError):
        return bool(exc.error.retryable or exc.error.status == 200)
    if tls_to_plain_http(exc):
        return False
    return isinstance(exc, TransientAnswer | ConnectionFailed | TimeoutError | ConnectionError)


class stop_after_silence_twice(stop_base):  # named as tenacity names its stops
    """Stop when two attempts in a row found the host silent (one state per request)."""

    def __init__(self) -> None:
        self.silent = 0

    def __call__(self, retry_state: RetryCallState) -> bool:
        outcome = retry_state.outcome
        error = outcome.exception() if outcome is not None else None
        self.silent = self.silent + 1 if isinstance(error, HostSilent) else 0
        return self.silent >= 2


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry, and how long to wait in between."""

    wait_min: float
    wait_max: float
    attempts: int | None = None
    """At most this many attempts (None: bounded by `deadline` alone)."""
    deadline: float | None = None
    """Seconds from the first attempt after which no retry starts."""

    @classmethod
    def for_requests(
        cls, *, attempts: int, timeout: float, wait_min: float, wait_max: float
    ) -> RetryPolicy:
        """A generation request: `attempts` of at most `timeout` seconds each."""
        return cls(wait_min, wait_max, attempts=attempts, deadline=attempts * timeout)

    @classmethod
    def for_readiness(cls, *, timeout: float, wait_min: float, wait_max: float) -> RetryPolicy:
        """Waiting for an endpoint: as often as `timeout` seconds allow."""
        return cls(wait_min, wait_max, deadline=timeout)

    def _options(self, before_sleep: BeforeSleep | None) -> dict[str, Any]:
        stops: list[stop_base] = []
        if self.attempts is not None:
            stops += [stop_after_attempt(self.attempts), stop_after_silence_twice()]
        if self.deadline is not None:
            stops.append(stop_before_delay(self.deadline))
        return {
            "retry": retry_if_exception(should_retry),
            "stop": stop_any(*stops) if stops else stop_never,
            "wait": wait_exponential(
                multiplier=self.wait_min, min=self.wait_min, max=self.wait_max
            ),
            "before_sleep": before_sleep,
            "reraise": True,
        }

    def retrying(
        self,
        *,
        before_sleep: BeforeSleep | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> Retrying:
        """For a blocking call: ``policy.retrying()(function)``."""
        return Retrying(sleep=sleep, **self._options(before_sleep))

    def async_retrying(self, *, before_sleep: BeforeSleep | None = None) -> AsyncRetrying:
        """For a coroutine: ``async for attempt in policy.async_retrying(): with attempt: ...``."""
        return AsyncRetrying(**self._options(before_sleep))
