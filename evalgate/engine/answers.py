"""An engine's answer, decoded into typed values where it enters evalgate: a generation, and
what NVIDIA Dynamo's OpenAI frontend answers where it differs from vLLM and the routers (its
readiness, its wordless rejections). Pure functions: the HTTP happens elsewhere.

The answer is the engine's word, not evalgate's: each field is taken only when it has the type
and range it must have. A count that is negative, `true` or a string, a finish_reason that is
not text, is named in a problem (`Problems`) and not used, so nothing implausible reaches the
evidence. A body with no choices[0] text is malformed (retried).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from evalgate.engine.wire import MAX_MESSAGE_CHARS, EngineError, json_or_none, parse_error
from evalgate.errors import EngineAnswerError, MalformedAnswer
from evalgate.scrub import capped

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
REASONING_FIELDS = ("reasoning_content", "reasoning")
"""Where reasoning parsers put a chat answer's thinking (vLLM: reasoning_content; newer releases
also or instead reasoning)."""


@dataclass(frozen=True)
class Completion:
    """One answer from the engine."""

    text: str
    finish_reason: str | None
    completion_tokens: int | None
    attempts: int
    source: str = "content"
    """The answer's field, as evidence.model.Reply.answer_field records it."""
    model: str | None = None
    """The model the answer names (its "model" field), when it names one."""
    reasoning: str | None = None
    """The message's reasoning text (reasoning_content or reasoning), whatever the answer's
    field."""
    reasoning_tokens: int | None = None
    """usage.completion_tokens_details.reasoning_tokens, where the engine reports it."""


@dataclass
class Problems:
    """Implausible values the engine sent, by field: how often, and the first one seen."""

    seen: Counter[str] = field(default_factory=Counter)
    first: dict[str, str] = field(default_factory=dict)

    def note(self, name: str, value: Any) -> None:
        self.seen[name] += 1
        self.first.setdefault(name, capped(repr(value), 80))

    def count(self, value: Any, name: str) -> int | None:
        """A count the engine reported, >= 0; anything else None, noted."""
        found = whole(value)
        if found is None and value is not None:
            self.note(name, value)
        return found

    def text(self, value: Any, name: str) -> str | None:
        """A string the engine reported; anything else None, noted."""
        if value is None or isinstance(value, str):
            return value
        self.note(name, value)
        return None

    def describe(self) -> list[str]:
        """One warning per field."""
        return [
            f"{count} answer(s) carried an implausible {name} (first: {self.first[name]}): not used"
            for name, count in self.seen.items()
        ]


def whole(value: Any, least: int = 0) -> int | None:
    """A number an engine reported: a whole number of at least `least` (never a bool)."""
    usable = isinstance(value, int) and not isinstance(value, bool) and value >= least
    return value if usable else None


def clean(text: str) -> str:
    """A JSON escape such as \\ud83d alone decodes to a lone surrogate, which no UTF-8 file
    (journal, samples) can hold: keep the answer, replace the broken character."""
    return _LONE_SURROGATE.sub("\ufffd", text)


def error_answer(raw: Any) -> EngineAnswerError | None:
    """A 200 whose JSON body is an error object ({"error": ...}, {"object": "error"}): the
    engine's error answer, its words kept."""
    if not isinstance(raw, dict) or "choices" in raw:
        return None
    is_error = "error" in raw or raw.get("object") == "error"
    return EngineAnswerError(parse_error(200, json.dumps(raw))) if is_error else None


def parse_answer(raw: Any, api: str, problems: Problems | None = None) -> Completion:
    """A parsed JSON answer, typed: the text of choice 0 and the field that held it, its
    finish_reason, the model named, the token counts and, for chat, the reasoning (its attempts
    are the sender's to count)."""
    problems = problems or Problems()
    model = problems.text(raw.get("model"), "model") if isinstance(raw, dict) else None
    try:
        choices = raw["choices"]
        # the answer is choice 0 by its index; a server may list the choices in any order
        choice = next(
            (c for c in choices if isinstance(c, dict) and c.get("index") == 0), choices[0]
        )
        message = choice["message"] if api == "chat" else {}
        content = message["content"] if api == "chat" else choice["text"]
        usage = raw.get("usage") or {}
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        raise MalformedAnswer(f"no choices[0] text in {capped(str(raw), 200)!r}") from exc
    source = "content" if api == "chat" else "text"
    found = [(n, message.get(n)) for n in REASONING_FIELDS]
    thought = next(((n, text) for n, text in found if isinstance(text, str) and text), None)
    if content in (None, "", []) and thought is not None:
        # the benchmark harness scores an answer cut while thinking from its reasoning too
        source, content = thought
    if content is not None and not isinstance(content, str) and content != []:
        problems.note(source, content)
    usage = usage if isinstance(usage, dict) else {}
    details = usage.get("completion_tokens_details")
    tokens = details.get("reasoning_tokens") if isinstance(details, dict) else None
    return Completion(
        clean(content) if isinstance(content, str) else "",
        problems.text(choice.get("finish_reason"), "finish_reason"),
        problems.count(usage.get("completion_tokens"), "usage.completion_tokens"),
        0,
        source,
        model,
        clean(thought[1]) if thought is not None else None,
        problems.count(tokens, "usage.completion_tokens_details.reasoning_tokens"),
    )


# NVIDIA Dynamo's frontend (ai-dynamo 1.6.1, seen in front of vLLM); what evalgate does with its
# answers: docs/harness.md, "NVIDIA Dynamo's frontend".

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
