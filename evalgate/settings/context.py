"""The eval context and the budget: ISL/OSL, the model's config, the limits the engines serve,
the output budget. The context stage receives this group, itself."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from evalgate.numbers import TOKENS, TOKENS_MAX, tokens
from evalgate.settings.fields import Flag, Group


class ContextSettings(Group):
    """What the user said about the context: lengths, the model's config, served limits."""

    heading = "context and budget"

    isl: int | None = Field(None, ge=1, le=TOKENS_MAX)
    """Benchmark input sequence length in tokens (8192; 8k = 8000 and 8K = 8192, as vLLM reads
    server arguments; so for every length in tokens). 0 or empty: not given, as the benchmark
    harness's agentic rows say it; the context then starts from the native maximum."""

    osl: int | None = Field(None, ge=1, le=TOKENS_MAX)
    """Benchmark output sequence length in tokens (0 or empty: not given)."""

    model_config_path: Annotated[Path | None, Flag("model-config")] = None
    """The model's config.json, or its directory; gives the native maximum length."""

    served_max_model_len: int | None = Field(None, ge=1, le=TOKENS_MAX)
    """The --max-model-len the engines serve, when /v1/models cannot tell (TensorRT-LLM)."""

    server_config: list[str] = Field(default_factory=list)
    """Engine server-argument strings holding --max-model-len N (as benchmark scripts keep
    them). Repeatable flag; one string in EVALGATE_SERVER_CONFIG."""

    prefill_server_config: str | None = None
    """The prefill workers' server arguments."""

    decode_server_config: str | None = None
    """The decode workers' server arguments."""

    eval_max_model_len: int | None = Field(None, ge=1, le=TOKENS_MAX)
    """Explicit eval context, overriding the derivation (still clamped to what is served; 0 or
    empty: not given)."""

    max_tokens: int | None = Field(None, ge=1, le=TOKENS_MAX)
    """Force the output budget instead of deriving it (the probe still checks it)."""

    budget_policy: Literal["fit", "harness"] = "fit"
    """fit: served context minus the longest eval prompt. harness: the benchmark harness's rule
    (ctx - 4096 when ctx > 4096, else ctx / 2), both capped at max_tokens_cap."""

    context_margin: int = Field(256, ge=0, le=TOKENS_MAX)
    """Tokens added to ISL + OSL for the eval context."""

    max_tokens_cap: int = Field(16384, ge=1, le=TOKENS_MAX)
    """Upper bound on the derived output budget."""

    strict: bool = False
    """Treat a budget that would truncate answers (prompt + budget > served) as an error."""

    @field_validator("isl", "osl", "eval_max_model_len", mode="before")
    @classmethod
    def _zero_is_unset(cls, value: Any) -> Any:
        """0 (or an empty variable) means "not given", as the benchmark harness reads ISL, OSL
        and the eval context: its agentic rows pass '0' for all three."""
        text = value.strip() if isinstance(value, str) else None
        if text == "" or (text is not None and TOKENS.fullmatch(text) and tokens(text) == 0):
            return None
        return None if type(value) is int and value == 0 else value

    @field_validator("server_config", mode="before")
    @classmethod
    def _one_config(cls, value: Any) -> Any:
        """In the environment, the variable holds one server-argument string."""
        if isinstance(value, str):
            return [value] if value.strip() else []
        return value

    @property
    def server_args(self) -> list[tuple[str, str]]:
        """The engines' server-argument strings given, each with where it came from."""
        given = [(args, f"--server-config #{i + 1}") for i, args in enumerate(self.server_config)]
        if self.prefill_server_config:
            given.append((self.prefill_server_config, "PREFILL_SERVER_CONFIG"))
        if self.decode_server_config:
            given.append((self.decode_server_config, "DECODE_SERVER_CONFIG"))
        return given
