"""The eval context and the output budget: pure decisions, every step recorded, nothing guessed
(a missing input is a ContextError). The formulas: docs/run.md, 1 and 2.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from evalgate import numbers, scrub
from evalgate.errors import ContextError
from evalgate.evidence.model import Limit

MIN_USEFUL_BUDGET = 256
"""lm-eval's own default for gsm8k answers; a smaller budget truncates typical answers."""


@dataclass(frozen=True)
class EvalContext:
    """The derived context, the budget, and how each was reached."""

    eval_max_model_len: int
    max_tokens: int
    budget_policy: str
    native: Limit | None
    served: tuple[Limit, ...]
    requested: int | None
    prompt_tokens: Limit | None
    steps: tuple[str, ...]
    warnings: tuple[str, ...] = field(default=())

    @property
    def served_min(self) -> Limit | None:
        """The smallest served limit: the one that binds."""
        return min(self.served, key=lambda limit: limit.value) if self.served else None

    @property
    def truncation_risk(self) -> bool:
        """Would the longest prompt plus the budget overrun what the engines serve?"""
        bound = self.served_min.value if self.served_min else self.eval_max_model_len
        return self.prompt_tokens is not None and self.prompt_tokens.value + self.max_tokens > bound

    def as_env(self) -> str:
        """Shell lines for ``eval "$(evalgate context --format env ...)"``."""
        return f"EVAL_MAX_MODEL_LEN={self.eval_max_model_len}\nEVAL_MAX_TOKENS={self.max_tokens}\n"


# Server arguments that set the served context, by engine: vLLM, SGLang, TensorRT-LLM.
_SERVED_LEN_FLAG = re.compile(
    r"--(max[-_]model[-_]len|context[-_]length|max[-_]seq[-_]len)(?:=|\s+|$)(\S*)"
)


def served_limits_from_args(args: str, source: str) -> list[Limit]:
    """The --max-model-len (or --context-length, --max_seq_len) values in a server-args string.
    A flag whose value is not a number of tokens is a ContextError: the engine would refuse it,
    and dropping it would let a larger limit decide."""
    found = []
    for match in _SERVED_LEN_FLAG.finditer(args):
        try:  # evalgate's one rule for numbers, which reads no more digits than a range needs
            value = numbers.tokens(match.group(2))
        except ValueError:
            value = 0
        if not 1 <= value <= numbers.TOKENS_MAX:
            raise ContextError(
                f"{source} holds --{match.group(1)} {scrub.capped(repr(match.group(2)), 40)}, "
                "not a number of tokens "
                f"from 1 to {numbers.shown(numbers.TOKENS_MAX)} in ASCII digits (8192, 8k or "
                "8K). Fix the server arguments, or give --served-max-model-len."
            )
        found.append(Limit(value, source))
    return found


def derive_max_model_len(
    *,
    isl: int | None,
    osl: int | None,
    margin: int,
    native: Limit | None,
    served: Sequence[Limit],
    override: int | None,
) -> tuple[int, int | None, list[str]]:
    """EVAL_MAX_MODEL_LEN, the ISL + OSL + margin asked for, and the steps taken."""
    steps: list[str] = []
    served_min = min(served, key=lambda limit: limit.value) if served else None
    requested = isl + osl + margin if isl is not None and osl is not None else None

    if override is not None:
        value = override
        steps.append(f"EVAL_MAX_MODEL_LEN={override} given explicitly")
    elif requested is not None and (native is not None or served_min is not None):
        value = requested
        steps.append(f"ISL {isl} + OSL {osl} + margin {margin} = {requested}")
        if native is not None and native.value < value:
            value = native.value
            steps.append(f"capped at the native maximum {native.value} ({native.source})")
    elif requested is None and (start := native or served_min) is not None:
        value = start.value
        steps.append(
            _not_given(isl, osl)
            + ": starting from "
            + (f"the native maximum {value} ({start.source})" if native else "the served limit")
        )
    else:
        raise ContextError(_missing_inputs_message(isl, osl, native, served_min))

    if served_min is not None:
        listed = ", ".join(f"{limit.value} ({limit.source})" for limit in served)
        if served_min.value < value:
            steps.append(
                f"clamped to the served limit {served_min.value} ({served_min.source}); "
                f"served limits seen: {listed}"
            )
            value = served_min.value
        else:
            steps.append(f"within every served limit: {listed}")
    return value, requested, steps


def _not_given(isl: int | None, osl: int | None) -> str:
    if isl is None and osl is None:
        return "ISL/OSL not given (0 or unset)"
    given = f"ISL {isl}" if isl is not None else f"OSL {osl}"
    return f"{'OSL' if isl is not None else 'ISL'} not given (0 or unset), so {given} is not used"


def _missing_inputs_message(
    isl: int | None, osl: int | None, native: Limit | None, served_min: Limit | None
) -> str:
    missing = []
    if isl is None or osl is None:
        missing.append("ISL and OSL (--isl/--osl or ISL/OSL)")
    if native is None:
        missing.append("the model's native maximum (--model-config or MODEL_PATH)")
    if served_min is None:
        missing.append(
            "the served --max-model-len (--base-url or --worker-url to ask the engines, "
            "--served-max-model-len, or --server-config)"
        )
    return (
        "Cannot derive EVAL_MAX_MODEL_LEN: missing "
        + "; ".join(missing)
        + ". Give them, or set --eval-max-model-len (EVAL_MAX_MODEL_LEN) explicitly. "
        "evalgate never falls back to a default length."
    )


def choose_budget(
    *,
    ctx: int,
    prompt_tokens: Limit | None,
    policy: str,
    cap: int,
    forced: int | None,
) -> tuple[int, list[str], list[str]]:
    """The output budget (max_tokens), the steps taken, and warnings for the result."""
    if forced is not None:
        return forced, [f"max_tokens={forced} forced by --max-tokens (the probe checks it)"], []
    steps: list[str] = []
    warnings: list[str] = []
    if policy == "harness":
        raw = ctx - 4096 if ctx > 4096 else ctx // 2
        steps.append(f"harness policy: {'ctx - 4096' if ctx > 4096 else 'ctx / 2'} = {raw}")
    else:
        if prompt_tokens is None:
            raise ContextError(
                "The fit budget needs the longest eval prompt's length in tokens, and none was "
                "measured. Use --budget-policy harness or give --max-tokens."
            )
        raw = ctx - prompt_tokens.value
        steps.append(
            f"fit policy: ctx {ctx} - longest prompt {prompt_tokens.value} tokens "
            f"({prompt_tokens.source}) = {raw}"
        )
        if raw <= 0:
            raise ContextError(
                f"The eval context {ctx} leaves no room to answer: the longest GSM8K prompt "
                f"takes {prompt_tokens.value} tokens ({prompt_tokens.source}). Serve a larger "
                "--max-model-len, or raise ISL/OSL."
            )
    value = min(raw, cap)
    if value < raw:
        steps.append(f"capped at {cap}")
    if value < MIN_USEFUL_BUDGET:
        warnings.append(
            f"max_tokens={value} is below {MIN_USEFUL_BUDGET}: long answers will be cut and "
            "scored wrong. Serve a larger --max-model-len for a meaningful score."
        )
    return value, steps, warnings


def derive_context(
    *,
    isl: int | None,
    osl: int | None,
    margin: int,
    native: Limit | None,
    served: Iterable[Limit],
    override: int | None,
    prompt_tokens: Limit | None,
    policy: str,
    cap: int,
    forced_max_tokens: int | None,
    native_steps: Sequence[str] = (),
) -> EvalContext:
    """The whole derivation: context length, then budget, with every step."""
    served = tuple(served)
    ctx, requested, steps = derive_max_model_len(
        isl=isl, osl=osl, margin=margin, native=native, served=served, override=override
    )
    budget, budget_steps, warnings = choose_budget(
        ctx=ctx, prompt_tokens=prompt_tokens, policy=policy, cap=cap, forced=forced_max_tokens
    )
    result = EvalContext(
        eval_max_model_len=ctx,
        max_tokens=budget,
        budget_policy="forced" if forced_max_tokens is not None else policy,
        native=native,
        served=served,
        requested=requested,
        prompt_tokens=prompt_tokens,
        steps=(*native_steps, *steps, *budget_steps),
        warnings=tuple(warnings),
    )
    if result.truncation_risk and result.prompt_tokens is not None:
        bound = (
            f"the served limit {result.served_min.value}"
            if result.served_min
            else f"the eval context {ctx}"
        )
        note = (
            f"longest prompt {result.prompt_tokens.value} + max_tokens {budget} = "
            f"{result.prompt_tokens.value + budget} exceeds {bound}: "
            "answers may be cut silently at the limit"
        )
        result = replace(result, warnings=(*result.warnings, note))
    return result
