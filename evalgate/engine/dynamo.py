"""What NVIDIA Dynamo's OpenAI frontend answers, decoded (ai-dynamo 1.6.1, seen in front of vLLM).

Pure functions only: the HTTP happens elsewhere. What the frontend answers where it differs from
vLLM and the routers, and what evalgate does with it: docs/harness.md, "NVIDIA Dynamo's frontend".
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, Literal

from evalgate.engine.answers import whole
from evalgate.engine.wire import MAX_MESSAGE_CHARS, EngineError, json_or_none, parse_error
from evalgate.scrub import capped

ReadyState = Literal["ready", "not ready", "unlisted"]
WORDLESS = frozenset({"Bad Request", "Invalid request"})
"""The whole message of Dynamo's frontend for a rejection whose reason it did not pass on."""
_UNAVAILABLE = "Service temporarily unavailable"
_NOT_READY = re.compile(r"Model `[^`]*` is not ready to serve requests yet")
_EMPTY_404 = parse_error(404, "").message
NO_WORDS = "Dynamo's frontend passed on no reason: the engine's own words are in the worker's log."
ASK_WORKERS = (
    "Give each worker's own OpenAI URL with --worker-url: evalgate then sends it the same request "
    "directly for its words, and reads its served limit."
)


def context_window_note(window: int, model: str, label: str) -> str:
    """The warning for a `context_window` evalgate did not read as a served limit."""
    return (
        f"/v1/models of {label} lists context_window {window} for {model} (Dynamo's frontend): "
        "not read as a served limit, because Dynamo lists the model config's "
        "max_position_embeddings there when its worker registers no length; the served limit "
        "must come from --worker-url, --server-config or --served-max-model-len"
    )


def ready_answer(status: int, body: str) -> tuple[ReadyState, str] | None:
    """Dynamo's answer to `GET /v1/models/{id}/ready` and its reason, or None when the answer is
    not Dynamo's (a server without that route: vLLM answers 404 `{"detail": "Not Found"}`).
    "unlisted": the frontend knows no such model (no worker registered it, or it was dropped)."""
    parsed = json_or_none(body)
    if not isinstance(parsed, dict):
        return None
    ready = parsed.get("ready")
    if isinstance(ready, bool) and status in (200, 503):
        reason = parsed.get("reason")
        said = capped(str(reason or f"HTTP {status}"), MAX_MESSAGE_CHARS)
        return ("ready" if ready else "not ready"), said
    if status == 404 and (parsed.get("message"), parsed.get("type")) == (
        "Model not found",
        "Not Found",
    ):
        return "unlisted", "Model not found"
    return None


def stream_error(event: dict[str, Any], text: str, status: int) -> EngineError:
    """An error sent as a stream event (`data: {"error": {...}}`) after HTTP `status`: the
    error's own code, when it is an HTTP error status, is the status that decides (Dynamo
    streams a 400 this way); without one, the HTTP status stays (a 200: a malformed answer)."""
    error = parse_error(status, text)
    inner = event.get("error")
    code = whole(inner.get("code"), 400) if isinstance(inner, dict) else None
    return replace(error, status=code) if code is not None and code < 600 else error


def wordless(error: EngineError) -> bool:
    """A rejection whose reason Dynamo's frontend did not pass on ("Bad Request")."""
    return 400 <= error.status < 500 and error.message.strip() in WORDLESS


def worker_gone(error: EngineError) -> str | None:
    """What Dynamo's frontend said about a model whose worker went away, as a clause; None when
    the answer is not one of those."""
    if error.status == 404 and error.message == _EMPTY_404:
        return "Dynamo's frontend no longer lists the model (HTTP 404 with an empty body)"
    if error.status == 503 and error.type == "Service Unavailable":
        if error.message == _UNAVAILABLE:
            return f"Dynamo's frontend cannot reach the model's worker (HTTP 503: {_UNAVAILABLE})"
        if _NOT_READY.match(error.message):
            return f"Dynamo's frontend has no live worker for the model (HTTP 503: {error.message})"
    return None
