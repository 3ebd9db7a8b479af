"""What each stage is given: small frozen values cut from Settings once, at the top of a command
(`cut`, by their fields' names), so no stage below holds the whole model.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from evalgate.engine.urls import Network
from evalgate.errors import UsageError
from evalgate.evidence.harness_files import Job
from evalgate.evidence.stage_records import Labels
from evalgate.rules.sequential import EarlyStop

if TYPE_CHECKING:
    from evalgate.settings.values import Settings

T = TypeVar("T")


@dataclass(frozen=True)
class Endpoint:
    """Where the engine is, and how every request to it is sent (its secrets out of its repr)."""

    base_url: str | None = field(repr=False)
    served_model: str | None
    """The name requests carry (--served-model-name, else --model)."""
    api_key: str | None = field(repr=False)
    api: Literal["chat", "completions"]
    worker_urls: tuple[str, ...] = field(repr=False)
    network: Network
    timeout: float
    max_attempts: int
    retry_wait_min: float
    retry_wait_max: float
    ready_timeout: float
    discovery_timeout: float
    strict: bool


@dataclass(frozen=True)
class ContextAsk:
    """What the user said about the context: lengths, the model's config, served limits."""

    isl: int | None
    osl: int | None
    context_margin: int
    model_config_path: Path | None
    served_max_model_len: int | None
    server_args: tuple[tuple[str, str], ...]
    """Server-argument strings, each with where it came from."""
    eval_max_model_len: int | None
    max_tokens: int | None
    max_tokens_cap: int
    budget_policy: Literal["fit", "harness"]


@dataclass(frozen=True)
class EvalAsk:
    """How the eval's requests are sent and read."""

    limit: int | None
    num_concurrent: int
    max_failed_requests: int
    think_start_marker: str
    think_end_marker: str
    chat_template_kwargs: dict[str, Any] | None
    reasoning_effort: str | None
    early_stop: EarlyStop
    alpha: float

    def request_fields(self) -> dict[str, Any]:
        """What every generation request carries besides the task's settings."""
        fields: dict[str, Any] = {}
        if self.chat_template_kwargs is not None:
            fields["chat_template_kwargs"] = dict(self.chat_template_kwargs)
        if self.reasoning_effort is not None:
            fields["reasoning_effort"] = self.reasoning_effort
        return fields


@dataclass(frozen=True)
class GateAsk:
    """The gate rule's parameters besides the threshold."""

    max_truncated_rate: float
    max_failed_requests: int
    min_samples: int | None


def cut(kind: type[T], settings: Settings, **given: Any) -> T:
    """A `kind` of the settings of its fields' names, but for those `given`."""
    names = [f.name for f in dataclasses.fields(kind) if f.name not in given]  # type: ignore[arg-type]
    return kind(**{name: getattr(settings, name) for name in names}, **given)


def require(settings: Settings, *names: str) -> None:
    """Fail with one message naming every missing setting."""
    missing = [n for n in names if getattr(settings, n) in (None, "", [])]
    if missing:
        flags = ", ".join("--" + n.replace("_", "-") for n in missing)
        raise UsageError(
            f"Missing {flags}: set the flag(s) or the matching environment variable(s) "
            "(see --help)."
        )


def endpoint(settings: Settings) -> Endpoint:
    key = settings.api_key.get_secret_value() if settings.api_key else None
    return cut(
        Endpoint,
        settings,
        api_key=key,
        worker_urls=tuple(settings.worker_urls),
        network=cut(Network, settings),
    )


def context_ask(settings: Settings) -> ContextAsk:
    return cut(ContextAsk, settings, server_args=tuple(settings.server_args()))


eval_ask = functools.partial(cut, EvalAsk)
gate_ask = functools.partial(cut, GateAsk)
job = functools.partial(cut, Job)


def labels(settings: Settings, topology: dict[str, Any] | None = None) -> Labels:
    """Benchmark labels, so `evalgate verify` can resolve thresholds and expected sets."""
    return job(settings).labels(settings.num_concurrent, topology)
