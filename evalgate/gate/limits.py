"""Gathering the numbers the context needs: native maximum, every served limit with its source
(all recorded, the smallest wins), prompt length (docs/run.md, 1).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from evalgate.engine import dynamo
from evalgate.engine.cards import served_limit
from evalgate.engine.urls import redact_url
from evalgate.engine.wire import credentials_advice
from evalgate.errors import ContextError, EndpointError
from evalgate.gate.context import EvalContext, derive_context, served_limits_from_args
from evalgate.gate.native import LENGTH_KEYS, load_native_max_len
from evalgate.lengths import Limit
from evalgate.settings.context import ContextSettings
from evalgate.settings.endpoint import EndpointSettings
from evalgate.tasks.prompts import Prompt

if TYPE_CHECKING:  # the HTTP client loads only when there is an engine to ask
    from evalgate.engine.discovery import EngineInfo
    from evalgate.engine.readiness import Readiness

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


def served_limits(
    ask: ContextSettings,
    endpoint: EndpointSettings,
    info: EngineInfo | None,
    ready: Readiness | None,
) -> tuple[list[Limit], list[str]]:
    """Every served limit found, with its source, and notes on the workers': the endpoint's card
    in the list its readiness check read (not a second one: the same card decides), every
    --worker-url's, and the ones the user stated (the explicit value, server-argument strings)."""
    found: list[Limit] = []
    notes: list[str] = []
    if ready is not None and info is not None:
        listed = served_limit(ready.cards, endpoint.served_model, "the endpoint", info.notes)
        found += [listed] if listed else []
    for url in endpoint.worker_urls:
        from evalgate.engine.discovery import EngineInfo  # loads the client
        from evalgate.engine.retry import FAILURES
        from evalgate.errors import EngineAnswerError

        label = redact_url(url)
        network = endpoint.network
        try:
            cards = EngineInfo(url, endpoint.key, network.discovery_timeout, network).models()
            limit = served_limit(cards, endpoint.served_model, f"worker {label}", notes)
        except FAILURES as exc:  # the user named the worker because its limit matters
            refused = credentials_advice(exc.error) if isinstance(exc, EngineAnswerError) else None
            raise EndpointError(
                f"Worker {label} did not answer /v1/models ({exc}). "
                + (
                    refused
                    or "Check --worker-url, or give its limit with --server-config / "
                    "--served-max-model-len instead."
                )
            ) from exc
        if limit is None:
            log.warning("worker %s reports no max_model_len", label)
        else:
            found.append(limit)
    if ask.served_max_model_len is not None:
        found.append(Limit(ask.served_max_model_len, "--served-max-model-len"))
    for args, source in ask.server_args:
        limits = served_limits_from_args(args, source)
        if not limits:
            log.warning("%s holds no --max-model-len: it does not clamp the context", source)
        found += limits
    return found, notes


def longest_prompt_tokens(
    info: EngineInfo | None, model: str | None, candidates: Sequence[Prompt]
) -> tuple[Limit, Prompt, Limit | None]:
    """The longest candidate in the engine's tokens (POST /tokenize), else estimated; and the
    max_model_len /tokenize reported, if any."""
    if info is not None and model is not None:
        counted = []
        for prompt in candidates:
            count = info.count_tokens(model, prompt)
            if count is None:
                break
            counted.append((count, prompt))
        if counted and len(counted) == len(candidates):
            count, prompt = max(counted, key=lambda pair: pair[0].count)
            limits = [c.max_model_len for c, _ in counted if c.max_model_len]
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
    ask: ContextSettings,
    endpoint: EndpointSettings,
    *,
    candidates: Sequence[Prompt],
    info: EngineInfo | None = None,
    ready: Readiness | None = None,
) -> tuple[EvalContext, Prompt]:
    """Everything measured, then the pure derivation: the context and the prompt to probe with
    (the longest). `info` and `ready`: the endpoint and what its readiness check listed, when
    there is one."""
    path = ask.model_config_path
    native = load_native_max_len(path) if path is not None else None
    if native is not None and native.value is None:  # it cannot say: an error, never a guess
        raise ContextError(
            f"The model config {path} has none of the length keys "
            f"({', '.join(LENGTH_KEYS)}), so its native maximum is unknown (vLLM would fall back "
            "to a default). Pass the model's own config.json, set --eval-max-model-len, or "
            "leave --model-config out to let the served limit decide."
        )
    served, workers = served_limits(ask, endpoint, info, ready)
    prompt_tokens, longest, told = longest_prompt_tokens(info, endpoint.served_model, candidates)
    served = merge_tokenize_limit(served, told)
    notes = [*(ready.warnings if ready else ()), *(info.notes if info else []), *workers]
    card = ready.card if ready is not None else None
    if card and card.context_window is not None and card.max_model_len is None and not served:
        # Dynamo's context_window is not read as a served limit: said before a ContextError
        unread = dynamo.context_window_note(card.context_window, card.id, "the endpoint")
        log.warning("%s", unread)
        notes.append(unread)
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
