"""The numbers the context needs, weighed: the model's native maximum length, derived from its
config.json as vLLM 0.32 does so the context asked for is one the engine would accept; every
served limit with its source (all recorded, the smallest wins); the longest prompt's tokens
(docs/run.md, 1). What the engines said is asked in engine/served.py.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalgate.context.budget import EvalContext, derive_context, served_limits_from_args
from evalgate.errors import ArtifactError, ContextError
from evalgate.evidence.model import Limit
from evalgate.reader import read
from evalgate.scrub import capped
from evalgate.settings.context import ContextSettings
from evalgate.tasks.spec import Prompt

if TYPE_CHECKING:
    from evalgate.engine.discovery import TokenCount
    from evalgate.engine.served import Served

LENGTH_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)
ROPE_TYPES_ALREADY_SCALED = frozenset(
    {"su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling"}
)
NEVER_SCALED_MODEL_TYPES = frozenset({"gemma3", "gemma3_text"})


@dataclass(frozen=True)
class NativeLength:
    """The native maximum and how it was found (one line per step, for --explain)."""

    value: int | None
    source: str
    steps: tuple[str, ...]


def _positive(value: Any, key: str, name: str, minimum: float = 0.0) -> float:
    """A length or factor from the config: a finite JSON number above `minimum` (a length: at
    least 1), else a clear error (an integer too big for a float among them)."""
    number = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        with contextlib.suppress(OverflowError):
            number = float(value)
    if number is None or not math.isfinite(number) or number <= 0 or number < minimum:
        shown = capped(repr(value), 40)
        raise ContextError(
            f"{name or 'The model config'}: {key} is {shown}, not a positive number. Pass the "
            "model's own config.json, or set --eval-max-model-len explicitly."
        )
    return number


def native_max_len(
    config: dict[str, Any], tokenizer_config: dict[str, Any] | None = None, *, name: str = ""
) -> NativeLength:
    """Apply vLLM's rules to a parsed config.json (and tokenizer_config.json, when present)."""
    where = f"{name}: " if name else ""
    nested = config.get("text_config")  # a multimodal model's language model
    text = nested if isinstance(nested, dict) else config
    steps: list[str] = []
    if text is not config:
        steps.append(f"{where}read the nested text_config")
    present = {  # vLLM skips a key it finds unset; a boolean is not a length either
        key: _positive(text[key], key, name, minimum=1)
        for key in LENGTH_KEYS
        if text.get(key) is not None and not isinstance(text.get(key), bool)
    }
    if not present:
        steps.append(f"{where}no length key ({', '.join(LENGTH_KEYS)}) present")
        return NativeLength(None, f"{where}no length key", tuple(steps))
    key = min(present, key=lambda k: present[k])
    length = float(present[key])
    if "model_max_length" in present:
        key, length = "model_max_length", float(present["model_max_length"])
        steps.append(f"{where}model_max_length={int(length)} wins outright")
    else:
        steps.append(f"{where}smallest length key: {key}={int(length)}")

    scalings = (text.get(key) for key in ("rope_scaling", "rope_parameters"))
    scaling = next((value for value in scalings if isinstance(value, dict)), None)
    model_type = str(text.get("model_type", config.get("model_type", "")))
    if scaling is not None and "factor" in scaling:
        rope_type = str(scaling.get("rope_type", scaling.get("type", "")))
        factor = _positive(scaling["factor"], "rope_scaling.factor", name)
        if model_type in NEVER_SCALED_MODEL_TYPES:
            steps.append(f"{where}rope factor {factor:g} ignored for {model_type}")
        elif rope_type in ROPE_TYPES_ALREADY_SCALED:
            steps.append(f"{where}rope type {rope_type}: length already scaled, factor ignored")
        else:
            length *= factor
            if not math.isfinite(length):
                raise ContextError(
                    f"{name}: {key} scaled by rope_scaling.factor {factor:g} is past any "
                    "length. Check the model's config, or pass --eval-max-model-len."
                )
            steps.append(f"{where}rope type {rope_type or '?'} x{factor:g} -> {int(length)}")
            if int(length) < 1:
                raise ContextError(
                    f"{name}: {key} scaled by rope_scaling.factor {factor:g} leaves no context "
                    f"({int(length)} tokens). Check the model's config, or pass "
                    "--eval-max-model-len."
                )
    source = f"{where}config {key}"

    if tokenizer_config is not None:
        cap = tokenizer_config.get("model_max_length")
        if isinstance(cap, int | float) and not isinstance(cap, bool) and cap < length:
            steps.append(
                f"{where}tokenizer_config model_max_length {int(cap)} ignored, as vLLM does "
                "for generative models"
            )
    return NativeLength(int(length), source, tuple(steps))


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = read(path)
    except ArtifactError as exc:
        raise ContextError(
            f"{exc.message} Pass --model-config (or MODEL_PATH) with the model's own "
            "config.json or the directory that holds it."
        ) from exc
    if not isinstance(data, dict):
        raise ContextError(
            f"The model config {path} holds a JSON {type(data).__name__}, "
            "not an object. Pass the model's own config.json."
        )
    return data


def load_native_max_len(path: Path) -> NativeLength:
    """Read config.json (a file, or a model directory holding one) and derive the maximum."""
    config_path = path / "config.json" if path.is_dir() else path
    if not config_path.exists():
        raise ContextError(
            f"No model config at {config_path}. Pass --model-config (or MODEL_PATH) with the "
            "model's config.json or the directory that holds it."
        )
    config = _read_json(config_path)
    tokenizer_path = config_path.parent / "tokenizer_config.json"
    tokenizer = _read_json(tokenizer_path) if tokenizer_path.exists() else None
    return native_max_len(config, tokenizer, name=config_path.name)


# The limits weighed, and the prompt's length.

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
    return replace(context, warnings=(*notes, *context.warnings)), longest
