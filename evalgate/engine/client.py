"""Sending the eval's generation requests: retries only where waiting can help.

lm-eval's own client retries every exception, HTTP 400 included, and then loses the whole run.
Here a request is retried by engine.retry's policy (connection errors, timeouts, 408, 429, 5xx and
malformed answers, with backoff, bounded attempts and time); any other status is the engine's
verdict on the request and is raised as fatal at once, with the engine's own message. The body
is engine.request's, the one the probe sent too.

Every attempt has a deadline (--timeout) on the whole answer, not only between bytes: a server
that trickles a byte now and then cannot hold a request forever. Credentials in the URL
(``http://user:password@host/v1``) are sent as HTTP basic auth, as before, but taken out of the
URL, so the HTTP library's request log never shows them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
from tenacity import RetryCallState

from evalgate.engine import request
from evalgate.engine.discovery import api_root
from evalgate.engine.retry import (
    ConnectionFailed,
    EngineAnswerError,
    RetryPolicy,
    TransientAnswer,
    engine_answer,
    should_retry,
)
from evalgate.engine.urls import authorization
from evalgate.engine.wire import EngineError, parse_error

log = logging.getLogger(__name__)
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class Completion:
    """One answer from the engine."""

    text: str
    finish_reason: str | None
    completion_tokens: int | None
    attempts: int
    source: str = "content"
    """The answer's field: content (chat), text (completions), or reasoning_content / reasoning
    when a chat answer's content was null or empty."""
    model: str | None = None
    """The model the answer names (its "model" field), when it names one."""
    reasoning: str | None = None
    """The message's reasoning text (reasoning_content or reasoning), whatever the answer's
    field."""
    reasoning_tokens: int | None = None
    """usage.completion_tokens_details.reasoning_tokens, where the engine reports it."""


def describe_failure(error: EngineError) -> str:
    """One line for a failed request: the engine's status and words, or (status 0) what went
    wrong on the way, since no status came back."""
    return error.describe() if error.status else f"no answer: {error.message}"


class RequestFailed(Exception):
    """A request that got no answer: `fatal` when retrying cannot help (a 4xx)."""

    def __init__(
        self,
        error: EngineError,
        *,
        fatal: bool,
        attempts: int,
        unreachable_workers: tuple[str, ...] = (),
    ) -> None:
        super().__init__(describe_failure(error))
        self.error = error
        self.fatal = fatal
        self.attempts = attempts
        self.unreachable_workers = unreachable_workers
        """Workers the router said it could not reach, in any answer of this eval so far."""


class MalformedAnswer(TransientAnswer):
    """A 200 whose body is not a completion."""


class AnswerTimedOut(TransientAnswer):
    """No complete answer within --timeout (the whole answer, not one read)."""


def _as_engine_error(exc: BaseException) -> EngineError:
    answer = engine_answer(exc)
    if answer is not None:
        return answer
    if isinstance(exc, AnswerTimedOut):
        return EngineError(0, "request timed out (--timeout)")
    if isinstance(exc, ConnectionFailed):
        return EngineError(0, f"connection failed ({exc})")
    return EngineError(200, f"malformed answer: {exc}")


REASONING_FIELDS = ("reasoning_content", "reasoning")
"""Where reasoning parsers put a chat answer's thinking (vLLM: reasoning_content; newer releases
also or instead reasoning)."""


def _chat_text(message: Any) -> tuple[Any, str]:
    """A chat message's answer and the field it came from: its content, or, when content is
    null or empty, its reasoning (the benchmark harness scores an answer cut while thinking
    from its reasoning too)."""
    content = message["content"]  # KeyError or TypeError: malformed
    if content not in (None, "", []):
        return content, "content"
    for name in REASONING_FIELDS:
        reasoning = message.get(name)
        if isinstance(reasoning, str) and reasoning:
            return reasoning, name
    return content, "content"


def parse_completion(raw: Any, api: str) -> tuple[str, str | None, int | None, str]:
    """Text, finish_reason, completion_tokens and the field that held the text, from a parsed
    JSON answer."""
    try:
        choices = raw["choices"]
        # the answer is choice 0 by its index; a server may list the choices in any order
        choice = next(
            (c for c in choices if isinstance(c, dict) and c.get("index") == 0), choices[0]
        )
        if api == "chat":
            content, source = _chat_text(choice["message"])
        else:
            content, source = choice["text"], "text"
        usage = raw.get("usage") or {}
    except (KeyError, IndexError, TypeError) as exc:
        raise MalformedAnswer(f"no choices[0] text in {str(raw)[:200]!r}") from exc
    tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
    finish = choice.get("finish_reason")
    return (
        # a JSON escape such as \ud83d alone decodes to a lone surrogate, which no UTF-8
        # file (journal, samples) can hold: keep the answer, replace the broken character
        _LONE_SURROGATE.sub("\ufffd", content) if isinstance(content, str) else "",
        finish if isinstance(finish, str) else None,
        tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None,
        source,
    )


def parse_reasoning(raw: Any, api: str) -> tuple[str | None, int | None]:
    """A chat answer's reasoning text and its reasoning tokens (where the engine reports
    usage.completion_tokens_details.reasoning_tokens); None where absent."""
    text = None
    if api == "chat":
        message = raw["choices"][0]["message"]
        for name in REASONING_FIELDS:
            value = message.get(name)
            if isinstance(value, str) and value:
                text = _LONE_SURROGATE.sub("\ufffd", value)
                break
    usage = raw.get("usage") if isinstance(raw, dict) else None
    details = usage.get("completion_tokens_details") if isinstance(usage, dict) else None
    tokens = details.get("reasoning_tokens") if isinstance(details, dict) else None
    return text, tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None


async def _headers_sent(_session: Any, context: Any, _params: Any) -> None:
    """aiohttp's signal that a request's headers left: the caller's `on_sent`."""
    on_sent = context.trace_request_ctx
    if on_sent is not None:
        on_sent()


class EvalClient:
    """Async generation requests against one endpoint, with evalgate's retry policy."""

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str | None,
        api: str,
        timeout: float,
        attempts: int,
        wait_min: float,
        wait_max: float,
        max_connections: int,
    ) -> None:
        self.api = api
        self.timeout = timeout
        self.policy = RetryPolicy.for_requests(
            attempts=attempts, timeout=timeout, wait_min=wait_min, wait_max=wait_max
        )
        self.retried = 0
        self.unreachable_workers: dict[str, None] = {}  # ordered set
        url, header = authorization(api_root(base_url), api_key)
        self._url = url + request.path(api)
        self._headers = request.headers(header)
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        """The connection pool, made in the event loop that sends (aiohttp's rule)."""
        if self._session is None:
            trace = aiohttp.TraceConfig()
            trace.on_request_headers_sent.append(_headers_sent)
            self._session = aiohttp.ClientSession(
                trace_configs=[trace],
                connector=aiohttp.TCPConnector(limit=self._max_connections),
                headers=self._headers,
                timeout=aiohttp.ClientTimeout(total=self.timeout),
                trust_env=True,  # HTTP(S)_PROXY and NO_PROXY, as the readiness check reads them
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def _send(
        self, body: dict[str, Any], on_sent: Callable[[], None] | None
    ) -> tuple[tuple[str, str | None, int | None, str], tuple[str | None, int | None], str | None]:
        try:
            async with self._open().post(
                self._url,
                data=request.encode(body),
                allow_redirects=False,
                trace_request_ctx=on_sent,
            ) as response:
                status, data = response.status, await response.read()
        except asyncio.TimeoutError as exc:
            raise AnswerTimedOut(f"no complete answer within {self.timeout:g} s") from exc
        except aiohttp.ClientError as exc:
            raise ConnectionFailed.of(exc) from exc
        if not 200 <= status < 300:
            raise EngineAnswerError(parse_error(status, data.decode("utf-8", "replace")))
        try:
            raw = json.loads(data)
        except ValueError as exc:  # a 200 whose body is not JSON (or not UTF-8)
            raise MalformedAnswer(f"body is not JSON ({exc})") from exc
        named = raw.get("model") if isinstance(raw, dict) else None
        model = named if isinstance(named, str) else None
        return parse_completion(raw, self.api), parse_reasoning(raw, self.api), model

    def _note(self, exc: BaseException | None) -> None:
        """Remember a worker the router could not reach: later answers (a router's 503 "No
        available workers") no longer name it."""
        answer = engine_answer(exc) if exc is not None else None
        worker = answer.unreachable_worker if answer is not None else None
        if worker is not None:
            self.unreachable_workers[worker] = None

    def _count_retry(self, state: RetryCallState) -> None:
        self.retried += 1
        error = state.outcome.exception() if state.outcome else None
        self._note(error)
        cause = error.__cause__ if error is not None else None
        log.debug("retry %d after %s (%r)", state.attempt_number, error, cause)

    async def complete(
        self, body: dict[str, Any], *, on_sent: Callable[[], None] | None = None
    ) -> Completion:
        """One request, retried as the policy allows; raises RequestFailed. `on_sent` is called
        each time the request's headers have left for the engine."""
        attempt = 0
        try:
            async for attempt_state in self.policy.async_retrying(before_sleep=self._count_retry):
                attempt = attempt_state.retry_state.attempt_number
                with attempt_state:
                    answer, (reasoning, thought), model = await self._send(body, on_sent)
        except (EngineAnswerError, ConnectionFailed, MalformedAnswer, AnswerTimedOut) as exc:
            self._note(exc)
            raise RequestFailed(
                _as_engine_error(exc),
                fatal=not should_retry(exc),
                attempts=attempt,
                unreachable_workers=tuple(self.unreachable_workers),
            ) from exc
        text, finish, tokens, source = answer
        return Completion(
            text,
            finish,
            tokens,
            attempt,
            source,
            model=model,
            reasoning=reasoning,
            reasoning_tokens=thought,
        )
