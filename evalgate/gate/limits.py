"""Weighing the numbers the context needs: native maximum, every served limit with its source
(all recorded, the smallest wins), prompt length (docs/run.md, 1); what the engines said is
asked in engine/served.py.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from evalgate.errors import ContextError
from evalgate.gate.context import EvalContext, derive_context, served_limits_from_args
from evalgate.gate.native import LENGTH_KEYS, load_native_max_len
from evalgate.lengths import Limit
from evalgate.settings.context import ContextSettings
from evalgate.tasks.prompts import Prompt

if TYPE_CHECKING:
    from evalgate.engine.discovery import TokenCount
    from evalgate.engine.served import Served

log = logging.getLogger(__name__)
TURN_OVERHEAD_TOKENS = 16
"""Estimate: tokens a chat template may add per turn (role markers, separators)."""
BYTES_PER_TOKEN = 3
"""Estimate, on the cautious side for GSM8K's prompts even with a small vocabulary (larger ones
take fewer tokens; BENCHMARKS.md has the check). Used only where the engine has no /tokenize."""


def estimate_tokens(prompt: Prompt) -> int:
    """A cautious token count with no tokenizer at hand (the result records it as one)."""
    if prompt.messages is not None:
        size = sum(len(m["content"].encode()) for m in prompt.messages)
        turns = len(prompt.messages) + 1
    else:
        size, turns = len((prompt.text or "").encode()), 0
    return -(-size // BYTES_PER_TOKEN) + turns * TURN_OVERHEAD_TOKENS


def stated_limits(ask: ContextSettings) -> list[Limit]:
    """The served limits the user stated: the explicit value, the server-argument strings."""
    found = []
    if ask.served_max_model_len is not None:
        found.append(Limit(ask.served_max_model_len, "--served-max-model-len"))
    for args, source in ask.server_args:
        limits = served_limits_from_args(args, source)
        if not limits:
            log.warning("%s holds no --max-model-len: it does not clamp the context", source)
        found += limits
    return found


def longest_prompt_tokens(
    counts: Sequence[tuple[TokenCount, Prompt]], candidates: Sequence[Prompt]
) -> tuple[Limit, Prompt, Limit | None]:
    """The longest candidate in the engine's tokens (`counts`, of POST /tokenize), else
    estimated; and the max_model_len /tokenize reported, if any."""
    if counts:
        count, prompt = max(counts, key=lambda pair: pair[0].count)
        limits = [c.max_model_len for c, _ in counts if c.max_model_len]
        told = Limit(min(limits), "/tokenize of the endpoint") if limits else None
        return Limit(count.count, "/tokenize"), prompt, told
    prompt = max(candidates, key=estimate_tokens)
    estimate = Limit(estimate_tokens(prompt), "estimate: UTF-8 bytes / 3 + chat-turn overhead")
    return estimate, prompt, None


def merge_tokenize_limit(served: Sequence[Limit], told: Limit | None) -> list[Limit]:
    """The served limits, with the one /tokenize reported added when no other source reported
    that value. A prefill/decode router shows the prefill's card on /v1/models, but the decode
    answers /tokenize: a limit nobody else reported is the decode's, and it binds."""
    if told is None or any(told.value == limit.value for limit in served):
        return list(served)
    return [*served, told]


def gather_context(
    ask: ContextSettings, found: Served, candidates: Sequence[Prompt]
) -> tuple[EvalContext, Prompt]:
    """Everything measured, then the pure derivation: the context and the prompt to probe with
    (the longest). `found`: what the engines serve (engine.served.survey)."""
    path = ask.model_config_path
    native = load_native_max_len(path) if path is not None else None
    if native is not None and native.value is None:  # it cannot say: an error, never a guess
        raise ContextError(
            f"The model config {path} has none of the length keys "
            f"({', '.join(LENGTH_KEYS)}), so its native maximum is unknown (vLLM would fall back "
            "to a default). Pass the model's own config.json, set --eval-max-model-len, or "
            "leave --model-config out to let the served limit decide."
        )
    prompt_tokens, longest, told = longest_prompt_tokens(found.counts, candidates)
    served = merge_tokenize_limit([*found.limits, *stated_limits(ask)], told)
    notes = list(found.notes)
    if found.unread_window is not None and not served:
        # Dynamo's context_window is not read as a served limit: said before a ContextError
        log.warning("%s", found.unread_window)
        notes.append(found.unread_window)
    context = derive_context(
        isl=ask.isl,
        osl=ask.osl,
        margin=ask.context_margin,
        native=Limit(native.value, native.source) if native and native.value else None,
        served=served,
        override=ask.eval_max_model_len,
        prompt_tokens=prompt_tokens,
        policy=ask.budget_policy,
        cap=ask.max_tokens_cap,
        forced_max_tokens=ask.max_tokens,
        native_steps=native.steps if native else (),
    )
    return dataclasses.replace(context, warnings=(*notes, *context.warnings)), longest
