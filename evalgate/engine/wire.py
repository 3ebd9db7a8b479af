"""What an engine's error answer says, whichever engine sent it.

Bodies understood (REFERENCE: vLLM, SGLang, TensorRT-LLM, vllm-router):

- vLLM 0.32 nested: ``{"error": {"message", "type", "param", "code": 400}}``; newer releases put a
  string such as ``"context_length_exceeded"`` in ``code``;
- the flat form of older vLLM, SGLang and trtllm-serve: ``{"object": "error", "message", ...}``;
- FastAPI's ``{"detail": ...}``;
- vllm-router's ``text/plain`` 500 that wraps a worker's error:
  ``Request processing failed: Prefill server error 400 Bad Request: {engine json}``;
- a router's 500 when a worker refuses the connection, which names the worker's URL: vllm-router's
  text ``Transparent proxy request failed: ... error sending request for url (URL) caused by: ...
  Connection refused (os error 111)`` (an errno, never the worker's HTTP status), and
  sglang-router's JSON ``{"error": {"code": "call_upstream_request_error", "message": "error
  sending request for url (URL). URL: URL"}}``;
- anything else: the text itself.

Pure functions only: the HTTP happens elsewhere.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any

from evalgate.engine.urls import origin
from evalgate.environment import variables
from evalgate.scrub import capped

# "Prefill server error 400 Bad Request: ..."; never "(os error 111)", an errno.
_WRAPPED_STATUS = re.compile(r"\b(?<!os )error ([45]\d\d)\b", re.IGNORECASE)
_UNREACHABLE = re.compile(r"error sending request for url \((https?://[^)\s]+)\)")
_CAUSE = re.compile(r"caused by: ([^:]+?)\s*$")
MAX_MESSAGE_CHARS = 500
"""The engine's words kept: their first few hundred characters, then how long they were."""


@dataclass(frozen=True)
class EngineError:
    """An engine's error answer, reduced to what a person needs."""

    status: int
    """HTTP status the client saw."""
    message: str
    """The engine's own words, verbatim (past MAX_MESSAGE_CHARS: that many, and the length)."""
    type: str | None = None
    code: str | int | None = None
    param: str | None = None
    wrapped_status: int | None = None
    """The worker's status when a router wrapped its error in a 500."""

    @property
    def effective_status(self) -> int:
        """The status that decides: the worker's, when a router wrapped it."""
        return self.wrapped_status or self.status

    @property
    def retryable(self) -> bool:
        """Can the same request succeed later? Only overload and outages, never a 4xx."""
        status = self.effective_status
        return status in (408, 429) or 500 <= status < 600

    @property
    def unreachable_worker(self) -> str | None:
        """The worker a router could not send the request to (``http://host:port``), when a
        router's 5xx says so."""
        match = _UNREACHABLE.search(self.message) if self.status >= 500 else None
        return None if match is None else origin(match.group(1))

    def describe(self) -> str:
        """One line: status and the engine's words (after what they mean, for a router that
        could not reach its worker)."""
        wrapped = f" (worker said {self.wrapped_status})" if self.wrapped_status else ""
        worker = self.unreachable_worker
        if worker is not None:
            cause = _CAUSE.search(self.message)
            why = f" ({cause.group(1)})" if cause else ""
            return (
                f"HTTP {self.status}: worker {worker} is unreachable{why}; the router said: "
                f"{self.message}"
            )
        return f"HTTP {self.status}{wrapped}: {self.message}"


def credentials_advice(error: EngineError) -> str | None:
    """What to change when the server refused the credentials, whichever request it refused
    (none else: a length or a budget has nothing to do with it); None for any other answer."""
    if error.effective_status not in (401, 403):  # who is asking: only another key changes that
        return None
    names = " or ".join(variables("api_key"))
    return (
        f"The server refused the credentials: pass the API key it expects with --api-key, or "
        f"set {names}."
    )


def _from_object(status: int, obj: Any) -> EngineError | None:
    if not isinstance(obj, dict):
        return None
    inner = obj.get("error")
    if isinstance(inner, dict) and "message" in inner:
        obj = inner
    elif isinstance(inner, str) and "message" not in obj:
        return EngineError(status, capped(inner, MAX_MESSAGE_CHARS))
    if "message" in obj:
        code = obj.get("code")
        return EngineError(
            status=status,
            message=capped(str(obj["message"]), MAX_MESSAGE_CHARS),
            type=obj.get("type") if isinstance(obj.get("type"), str) else None,
            code=code if isinstance(code, str | int) and not isinstance(code, bool) else None,
            param=str(obj["param"]) if obj.get("param") is not None else None,
        )
    detail = obj.get("detail")
    if detail is not None:
        text = detail if isinstance(detail, str) else json.dumps(detail)
        return EngineError(status, capped(text, MAX_MESSAGE_CHARS))
    return None


def json_or_none(text: str | bytes) -> Any:
    """`text` decoded as JSON; None when it is not JSON."""
    try:
        return json.loads(text)
    except ValueError:
        return None


def parse_error(status: int, body: str) -> EngineError:
    """Turn a status and body into an EngineError, keeping the engine's words."""
    text = body.strip()
    found = _from_object(status, json_or_none(text))
    if found is not None:
        return found
    brace = text.find("{")
    found = _from_object(status, json_or_none(text[brace:])) if brace > 0 else None
    # Only a router's 5xx wraps a worker's answer; a 4xx is the answer itself.
    match = _WRAPPED_STATUS.search(text if found is None else text[:brace])
    wrapped = int(match.group(1)) if match and status >= 500 else None
    if found is not None:
        return replace(found, wrapped_status=wrapped)
    return EngineError(
        status,
        capped(text, MAX_MESSAGE_CHARS) or f"(empty body, HTTP {status})",
        wrapped_status=wrapped if wrapped and wrapped < 500 else None,
    )
