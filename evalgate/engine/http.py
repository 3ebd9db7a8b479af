"""The one HTTP layer: every request evalgate sends an engine, a router or a worker goes out
through one client for one wire (aiohttp), so each gets the same deadlines, keepalive, cap on the
decoded body and proxies (docs/architecture.md, "HTTP: one client, aiohttp"); and the one retry
policy for all of them, readiness, probe and eval.

Retry only what can succeed later, with attempts and total time both bounded; a 4xx is the
engine's answer, not a glitch. What is retried and the bounds: RELIABILITY.md, the rules.
"""

from __future__ import annotations

import asyncio
import errno
import socket
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp
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

from evalgate.engine.urls import Network, origin
from evalgate.errors import (
    AnswerTooLarge,
    ConnectionFailed,
    EngineAnswerError,
    HostSilent,
    TimedOut,
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
    """Can the same request succeed later? (RELIABILITY.md, the rules.)"""
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


# The client: a session, one exchange within its deadline, a body read within its cap.

T = TypeVar("T")
Reader = Callable[[aiohttp.ClientResponse], Awaitable[T]]
CHUNK = 1 << 16
"""Bytes a read takes at most: aiohttp's read buffer, so its decoding steps keep their size."""


def _socket_factory(network: Network) -> Callable[[Any], socket.socket]:
    """Sockets with keepalive and the user timeout, as far as the platform has them."""
    wanted = [
        ("TCP_KEEPIDLE", max(1, round(network.keepalive_idle))),
        ("TCP_KEEPALIVE", max(1, round(network.keepalive_idle))),  # macOS's name for it
        ("TCP_KEEPINTVL", max(1, round(network.keepalive_interval))),
        ("TCP_KEEPCNT", max(1, network.keepalive_probes)),
        ("TCP_USER_TIMEOUT", max(1, round(network.silence_limit * 1000))),
    ]
    options = [(getattr(socket, name), value) for name, value in wanted if hasattr(socket, name)]

    def make(addr_info: Any) -> socket.socket:
        family, kind, proto, _, _ = addr_info
        sock = socket.socket(family=family, type=kind, proto=proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        for name, value in options:
            sock.setsockopt(socket.IPPROTO_TCP, name, value)
        return sock

    return make


async def _headers_sent(_session: Any, context: Any, _params: Any) -> None:
    """aiohttp's signal that a request's headers left: the sender's `on_sent`."""
    on_sent = context.trace_request_ctx
    if on_sent is not None:
        on_sent()


def open_session(
    network: Network,
    *,
    headers: dict[str, str] | None = None,
    max_connections: int = 100,
    fresh: bool = False,
) -> aiohttp.ClientSession:
    """A connection pool with `network`'s settings (`fresh`: a new connection per request);
    call inside the event loop that sends."""
    # only what the standard library decodes (aiohttp would add br and zstd when installed)
    headers = {"Accept-Encoding": "gzip, deflate", **(headers or {})}
    connector = aiohttp.TCPConnector(
        limit=max_connections, socket_factory=_socket_factory(network), force_close=fresh
    )
    trace = aiohttp.TraceConfig()
    trace.on_request_headers_sent.append(_headers_sent)
    return aiohttp.ClientSession(
        connector=connector,
        headers=headers,
        trace_configs=[trace],
        trust_env=True,  # HTTP(S)_PROXY and NO_PROXY, as users expect
    )


def _silent(exc: BaseException) -> bool:
    """Did the kernel give up on the peer (no acknowledgement within TCP_USER_TIMEOUT)?"""
    if any(isinstance(seen, OSError) and seen.errno == errno.ETIMEDOUT for seen in causes(exc)):
        return True
    return f"TimeoutError({errno.ETIMEDOUT}," in str(exc)  # aiohttp's payload error quotes it


async def exchange(
    session: aiohttp.ClientSession,
    method: str,
    url: str,
    *,
    deadline: float,
    read: Reader[T],
    data: bytes | None = None,
    headers: dict[str, str] | None = None,
    on_sent: Callable[[], None] | None = None,
    network: Network,
) -> T:
    """One request, `read` taking its response, all within `deadline` seconds (aiohttp's total
    timeout runs from the connection to the body's last byte); `on_sent` is called when its
    headers have left. The library's errors become evalgate's, which should_retry judges."""
    timeout = aiohttp.ClientTimeout(total=deadline, sock_connect=network.connect_timeout)
    try:
        async with session.request(
            method,
            url,
            data=data,
            headers=headers,
            allow_redirects=False,
            timeout=timeout,
            trace_request_ctx=on_sent,
        ) as response:
            return await read(response)
    except aiohttp.ConnectionTimeoutError as exc:  # sock_connect's, before the total's
        raise HostSilent(
            f"{origin(url)} stopped answering: no connection within "
            f"{network.connect_timeout:g} s (--connect-timeout)"
        ) from exc
    except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
        if _silent(exc):  # before the total's: the kernel's ETIMEDOUT is a TimeoutError too
            raise HostSilent(
                f"{origin(url)} stopped answering: nothing came back for "
                f"{network.silence_limit:g} s (TCP keepalive)"
            ) from exc
        if isinstance(exc, asyncio.TimeoutError):
            raise TimedOut(f"no whole answer within {deadline:g} s") from exc
        raise ConnectionFailed.of(exc) from exc


async def decoded(response: aiohttp.ClientResponse, cap: int) -> AsyncIterator[bytes]:
    """The body in pieces, decoded, never more than `cap` bytes in all: past it AnswerTooLarge
    is raised and the rest is never read (the connection is dropped).

    aiohttp (3.14 on) decodes gzip and deflate a step at a time, each step at most the read
    buffer (64 KiB), and stops while what it decoded waits unread: counting the pieces here
    caps the whole, which its own limit does not. Never `response.read()`: reading to the end
    lifts the step's bound."""
    size = 0
    async for piece in response.content.iter_chunked(CHUNK):
        size += len(piece)
        if size > cap:
            raise AnswerTooLarge(
                f"the answer passed the cap of {cap} bytes (--max-response-bytes) and was cut there"
            )
        yield piece


async def read_capped(response: aiohttp.ClientResponse, cap: int) -> bytes:
    """The whole body, decoded, at most `cap` bytes (else AnswerTooLarge)."""
    return b"".join([piece async for piece in decoded(response, cap)])


async def lines(response: aiohttp.ClientResponse, cap: int) -> AsyncIterator[bytes]:
    """The body's lines, decoded, each with its newline (the last may have none)."""
    rest = b""
    async for piece in decoded(response, cap):
        *complete, rest = (rest + piece).split(b"\n")
        for line in complete:
            yield line + b"\n"
    if rest:
        yield rest
