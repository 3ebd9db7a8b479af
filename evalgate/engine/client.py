"""Generation requests, the probe's and the eval's: one body, one client, one request.

The body is lm-eval's local-chat-completions / local-completions payload, as the benchmark
harness sends it: the messages (chat) or the prompt (completions), the model, ``max_tokens``,
the task's temperature, the stop strings (chat keeps the first 4, as lm-eval does), lm-eval's
seed, then the task's other generation settings (top_p).

The probe is the eval's body streamed through the same `EvalClient`, read to its first event,
so it is the eval's request by construction; every attempt is retried by engine/http.py's policy
and has a deadline on the whole answer (docs/harness.md, "Where evalgate differs on purpose" (7)).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

import aiohttp
from tenacity import RetryCallState

from evalgate.engine import answers
from evalgate.engine.answers import Completion, Problems, error_answer, parse_answer
from evalgate.engine.http import (
    FAILURES,
    Reader,
    RetryPolicy,
    exchange,
    lines,
    open_session,
    read_capped,
    should_retry,
)
from evalgate.engine.urls import Network, api_root, authorization, redact_url
from evalgate.engine.wire import EngineError, json_or_none, parse_error
from evalgate.engine.workers import WorkerWatch
from evalgate.errors import (
    AnswerTooLarge,
    ConnectionFailed,
    EngineAnswerError,
    HostSilent,
    MalformedAnswer,
    ProbeError,
    RequestFailed,
    TimedOut,
)
from evalgate.scrub import capped
from evalgate.tasks.spec import Message

SEED = 1234
"""lm-eval sends this seed in every API request."""
CHAT_STOP_STRINGS = 4
"""lm-eval's chat model keeps only the first 4 stop strings (the API's limit)."""


def generation_body(
    *,
    api: str,
    model: str,
    max_tokens: int,
    stop: Sequence[str],
    sampling: Mapping[str, Any] | None = None,
    messages: Sequence[Message] | None = None,
    prompt: str | None = None,
) -> dict[str, Any]:
    """The body the eval sends: `messages` for the chat API, `prompt` for completions; the
    task's temperature as it writes it (0 unless `sampling` says otherwise), then its other
    generation settings (`sampling`, e.g. top_p), in lm-eval's order."""
    extra = dict(sampling or {})
    temperature = extra.pop("temperature", 0)
    chat = api == "chat"
    return {
        **({"messages": list(messages or ())} if chat else {"prompt": prompt}),
        "model": model,
        "max_tokens": max_tokens,
        "temperature": temperature,
        "stop": list(stop)[:CHAT_STOP_STRINGS] if chat else list(stop),
        "seed": SEED,
        **extra,
    }


def probe_body(body: dict[str, Any]) -> dict[str, Any]:
    """The probe's body: the eval's `body` (for the longest prompt), plus only `stream`, so that
    it can stop at the first token."""
    return {**body, "stream": True}


# Sending them: one client for the probe and the eval.

log = logging.getLogger(__name__)
KEPT_OF_NO_STREAM = 4096
"""Bytes of a body that is not a stream kept to say what it was."""
T = TypeVar("T")


async def first_event(response: aiohttp.ClientResponse, cap: int) -> None:
    """Read up to the stream's first `data:` event, what proves the probe was accepted; raise
    the engine's error answer, or MalformedAnswer, when there is none. An SSE comment (":...")
    is not an event: a server that sends only those is cut by the request's deadline. A 200
    that is a JSON error body, not a stream, is the engine's answer: its words are kept."""
    if not 200 <= response.status < 300:
        body = await read_capped(response, cap)
        raise EngineAnswerError(parse_error(response.status, body.decode("utf-8", "replace")))
    seen = bytearray()
    async for line in lines(response, cap):
        text = line.decode("utf-8", "replace").strip()
        if text.startswith("data:"):
            event = text[5:].strip()
            try:
                answer = json.loads(event)
            except ValueError as exc:
                raise MalformedAnswer(
                    f"its first event is not JSON: {capped(event, 200)!r}"
                ) from exc
            if isinstance(answer, dict) and "error" in answer:  # an error sent as an event
                raise EngineAnswerError(answers.stream_error(answer, event, response.status))
            return
        if len(seen) < KEPT_OF_NO_STREAM and not text.startswith(":"):
            seen += line
    text = seen.decode("utf-8", "replace").strip()
    error = error_answer(json_or_none(text))
    if error is not None:
        raise error
    shown = f": {capped(text, 200)!r}" if text else ""
    raise MalformedAnswer(f"the stream ended before its first event{shown}")


def _as_engine_error(exc: BaseException) -> EngineError:
    if isinstance(exc, EngineAnswerError):
        answer: EngineError = exc.error
        return answer
    if isinstance(exc, TimedOut):
        return EngineError(0, "request timed out (--timeout)")
    if isinstance(exc, HostSilent):
        return EngineError(0, str(exc))
    if isinstance(exc, AnswerTooLarge):
        return EngineError(200, str(exc))
    if isinstance(exc, ConnectionFailed):
        return EngineError(0, f"connection failed ({exc})")
    return EngineError(200, f"malformed answer: {exc}")


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
        network: Network,
        watch: WorkerWatch | None = None,
    ) -> None:
        self.api = api
        self.timeout = timeout
        self.network = network
        self.policy = RetryPolicy.for_requests(
            attempts=attempts, timeout=timeout, wait_min=wait_min, wait_max=wait_max
        )
        self.retried = 0
        self.unreachable_workers: dict[str, None] = {}  # ordered set
        self.problems = Problems()
        """Implausible values in the answers, named in the result's warnings."""
        url, header = authorization(api_root(base_url), api_key)
        self._url = url + ("/chat/completions" if api == "chat" else "/completions")
        self._headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "Authorization": header,
        }
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None
        self._watch = watch

    def _open(self) -> aiohttp.ClientSession:
        """The connection pool, made in the event loop that sends (aiohttp's rule); the
        workers' watch starts with it."""
        if self._session is None:
            self._session = open_session(
                self.network, headers=self._headers, max_connections=self._max_connections
            )
            if self._watch is not None:
                self._watch.start()
        return self._session

    async def close(self) -> None:
        if self._watch is not None:
            await self._watch.close()
        if self._session is not None:
            await self._session.close()

    async def _answer(self, response: aiohttp.ClientResponse) -> Completion:
        """A whole JSON answer, decoded into typed values (its attempts counted later)."""
        data = await read_capped(response, self.network.max_response_bytes)
        if not 200 <= response.status < 300:
            raise EngineAnswerError(parse_error(response.status, data.decode("utf-8", "replace")))
        try:
            raw = json.loads(data)
        except ValueError as exc:  # a 200 whose body is not JSON (or not UTF-8)
            raise MalformedAnswer(f"body is not JSON ({exc})") from exc
        error = error_answer(raw)
        if error is not None:
            raise error
        return parse_answer(raw, self.api, self.problems)

    def _note(self, exc: BaseException | None) -> None:
        """Remember a worker the router could not reach: later answers (a router's 503 "No
        available workers") no longer name it."""
        worker = exc.error.unreachable_worker if isinstance(exc, EngineAnswerError) else None
        if worker is not None:
            self.unreachable_workers[worker] = None

    def _count_retry(self, state: RetryCallState) -> None:
        self.retried += 1
        error = state.outcome.exception() if state.outcome else None
        self._note(error)
        cause = error.__cause__ if error is not None else None
        log.debug("retry %d after %s (%r)", state.attempt_number, error, cause)

    async def _send(
        self, body: dict[str, Any], read: Reader[T], on_sent: Callable[[], None] | None = None
    ) -> tuple[T, int]:
        """The one way a generation request goes out, the eval's and the probe's: `body` sent
        as the policy allows, `read` taking the answer; what it read and the attempts it took.
        Raises RequestFailed."""
        attempt = 0
        session = self._open()  # the workers' watch runs from the first request on
        data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
        try:
            async for attempt_state in self.policy.async_retrying(before_sleep=self._count_retry):
                attempt = attempt_state.retry_state.attempt_number
                with attempt_state:
                    work = exchange(
                        session,
                        "POST",
                        self._url,
                        deadline=self.timeout,
                        read=read,
                        data=data,
                        on_sent=on_sent,
                        network=self.network,
                    )
                    result = await (work if self._watch is None else self._watch.guard(work))
        except FAILURES as exc:
            self._note(exc)
            raise RequestFailed(
                _as_engine_error(exc),
                fatal=not should_retry(exc) and not isinstance(exc, AnswerTooLarge),
                attempts=attempt,
                unreachable_workers=tuple(self.unreachable_workers),
                url=self._url,
                timeout=self.timeout,
            ) from exc
        return result, attempt

    async def complete(
        self, body: dict[str, Any], *, on_sent: Callable[[], None] | None = None
    ) -> Completion:
        """One request, retried as the policy allows; raises RequestFailed. `on_sent` is called
        each time the request's headers have left for the engine."""
        answer, attempt = await self._send(body, self._answer, on_sent)
        return replace(answer, attempts=attempt)

    async def probe(self, body: dict[str, Any]) -> int:
        """The probe of the module's docstring for the eval's `body`; the attempts it took.
        Raises RequestFailed."""
        cap = self.network.max_response_bytes
        _, attempt = await self._send(probe_body(body), lambda response: first_event(response, cap))
        return attempt


def send_probe(body: dict[str, Any], **client: Any) -> int:
    """The probe from blocking code: `body` sent by an EvalClient made of `client` (its
    keyword arguments) on an event loop of its own; the attempts it took."""

    async def send() -> int:
        sender = EvalClient(**client)
        try:
            return await sender.probe(body)
        finally:
            await sender.close()

    return asyncio.run(send())


def worker_words(
    rejected: ProbeError, worker_urls: Sequence[str], body: dict[str, Any], client: dict[str, Any]
) -> ProbeError:
    """A probe Dynamo's frontend rejected without the engine's words, told with the words of a
    worker asked the same request directly (once each), or how to get them."""
    for url in worker_urls:
        label = redact_url(url)
        try:
            send_probe(body, **{**client, "base_url": url, "attempts": 1})
        except RequestFailed as answer:
            error = answer.error  # the engine's words only in an answer it gave
            if not isinstance(answer.__cause__, EngineAnswerError) or answers.wordless(error):
                continue
            said = f"The worker {label} answers the same request itself: {error.describe()}."
        else:
            error = rejected.engine_error
            said = (
                f"The worker {label} accepts the same request itself: the rejection is the "
                "frontend's own; its log says why."
            )
        break
    else:
        error = rejected.engine_error
        asked = "No --worker-url worker answered the same request with words either."
        said = f"{answers.NO_WORDS} {asked if worker_urls else answers.ASK_WORKERS}"
    found = ProbeError(f"{rejected.message} {said}")
    found.engine_error = error
    return found
