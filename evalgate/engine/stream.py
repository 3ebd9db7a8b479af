"""Reading a streamed answer up to its first event: what proves the probe was accepted.

An SSE comment (a line starting with ":") is not an event: a server that sends one every second
and never an event is cut by the request's deadline like any other. A 200 that is not a stream
but a JSON error body (`{"error": {...}}`) is the engine's answer: its words are kept.
"""

from __future__ import annotations

import json

import aiohttp

from evalgate.engine import dynamo
from evalgate.engine.answers import MalformedAnswer, error_answer
from evalgate.engine.http import lines, read_capped
from evalgate.engine.retry import EngineAnswerError
from evalgate.engine.wire import parse_error

KEPT = 4096
"""Bytes of a body that is not a stream kept to say what it was."""


class NotAStream(MalformedAnswer):
    """A 200 whose body is not a stream of server-sent events."""


def _not_a_stream(seen: bytes) -> Exception:
    """What a body with no event was: an error answer (its words kept), or not a stream."""
    text = seen.decode("utf-8", "replace").strip()
    try:
        error = error_answer(json.loads(text)) if text else None
    except ValueError:
        error = None
    if error is not None:
        return error
    shown = f": {text[:200]!r}" if text else ""
    return NotAStream(f"the stream ended before its first event{shown}")


async def first_event(response: aiohttp.ClientResponse, cap: int) -> None:
    """Read up to the stream's first `data:` event; raise the engine's error answer, or
    NotAStream, when there is none."""
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
                raise NotAStream(f"its first event is not JSON: {event[:200]!r}") from exc
            if isinstance(answer, dict) and "error" in answer:  # an error sent as an event
                raise EngineAnswerError(dynamo.stream_error(answer, event, response.status))
            return
        if len(seen) < KEPT and not text.startswith(":"):
            seen += line
    raise _not_a_stream(bytes(seen))
