"""The body of a generation request: one builder for the probe and the eval.

The body is lm-eval's local-chat-completions / local-completions payload, as the benchmark
harness sends it: the messages (chat) or the prompt (completions), the model, ``max_tokens``,
the task's temperature, the stop strings (chat keeps the first 4, as lm-eval does), lm-eval's
seed, then the task's other generation settings (top_p).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evalgate.tasks.prompts import Message

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
