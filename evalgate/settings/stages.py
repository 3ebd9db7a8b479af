"""What each stage is given: small frozen values cut from Settings once, at the top of a
command, so no stage below holds the whole model.

    Endpoint     where the engine is and how every request to it goes (readiness, the probe,
                 the eval's client)
    ContextAsk   what the context derivation is told (gate/limits.py)
    EvalAsk      how the eval's requests are sent and read (gate/eval_stage.py)
    GateAsk      the gate rule's parameters besides the threshold (gate/judge.py)
    job          the benchmark job's labels (evidence/harness_files.Job)
    labels       the labels a result records (evidence/model.Labels)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from evalgate.engine.http import Network
from evalgate.errors import UsageError
from evalgate.evidence.harness_files import Job
from evalgate.evidence.stage_records import Labels
from evalgate.rules.sequential import EarlyStop

if TYPE_CHECKING:
    from evalgate.settings.values import Settings


@dataclass(frozen=True)
class Endpoint:
    """Where the engine is, and how every request to it is sent."""

    base_url: str | None
    model: str | None
    """The name requests carry (--served-model-name, else --model)."""
    api_key: str | None
    api: Literal["chat", "completions"]
    worker_urls: tuple[str, ...]
    network: Network
    timeout: float
    attempts: int
    wait_min: float
    wait_max: float
    ready_timeout: float
    discovery_timeout: float
    strict: bool


@dataclass(frozen=True)
class ContextAsk:
    """What the user said about the context: lengths, the model's config, served limits."""

    isl: int | None
    osl: int | None
    margin: int
    model_config: Path | None
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
    max_failed: int
    think_start: str
    think_end: str
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
    """The gate rule's parameters besides the threshold, and the baseline to compare with."""

    max_truncated_rate: float
    max_failed: int
    min_samples: int | None
    baseline: Path | None
    max_drop: float


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
    return Endpoint(
        base_url=settings.base_url,
        model=settings.served_model,
        api_key=settings.api_key.get_secret_value() if settings.api_key else None,
        api=settings.api,
        worker_urls=tuple(settings.worker_urls),
        network=Network(
            connect_timeout=settings.connect_timeout,
            keepalive_idle=settings.keepalive_idle,
            keepalive_interval=settings.keepalive_interval,
            keepalive_probes=settings.keepalive_probes,
            max_response_bytes=settings.max_response_bytes,
        ),
        timeout=settings.timeout,
        attempts=settings.max_attempts,
        wait_min=settings.retry_wait_min,
        wait_max=settings.retry_wait_max,
        ready_timeout=settings.ready_timeout,
        discovery_timeout=settings.discovery_timeout,
        strict=settings.strict,
    )


def context_ask(settings: Settings) -> ContextAsk:
    return ContextAsk(
        isl=settings.isl,
        osl=settings.osl,
        margin=settings.context_margin,
        model_config=settings.model_config_path,
        served_max_model_len=settings.served_max_model_len,
        server_args=tuple(settings.server_args()),
        eval_max_model_len=settings.eval_max_model_len,
        max_tokens=settings.max_tokens,
        max_tokens_cap=settings.max_tokens_cap,
        budget_policy=settings.budget_policy,
    )


def job(settings: Settings) -> Job:
    return Job(
        model=settings.model,
        served_model=settings.served_model,
        model_prefix=settings.model_prefix,
        hardware=settings.hardware,
        framework=settings.framework,
        precision=settings.precision,
        kv_cache_dtype=settings.kv_cache_dtype,
        isl=settings.isl,
        osl=settings.osl,
        spec_decoding=settings.spec_decoding,
        is_multinode=settings.is_multinode,
        result_filename=settings.result_filename,
    )


def labels(settings: Settings, topology: dict[str, Any] | None = None) -> Labels:
    """Benchmark labels, so `evalgate verify` can resolve thresholds and expected sets."""
    return Labels(
        model_prefix=settings.model_prefix,
        hardware=settings.hardware,
        framework=settings.framework,
        precision=settings.precision,
        kv_cache_dtype=settings.kv_cache_dtype,
        isl=settings.isl,
        osl=settings.osl,
        concurrency=settings.num_concurrent,
        topology=topology,
    )


def eval_ask(settings: Settings) -> EvalAsk:
    return EvalAsk(
        limit=settings.limit,
        num_concurrent=settings.num_concurrent,
        max_failed=settings.max_failed_requests,
        think_start=settings.think_start_marker,
        think_end=settings.think_end_marker,
        chat_template_kwargs=settings.chat_template_kwargs,
        reasoning_effort=settings.reasoning_effort,
        early_stop=settings.early_stop,
        alpha=settings.alpha,
    )


def gate_ask(settings: Settings) -> GateAsk:
    return GateAsk(
        max_truncated_rate=settings.max_truncated_rate,
        max_failed=settings.max_failed_requests,
        min_samples=settings.min_samples,
        baseline=settings.baseline,
        max_drop=settings.max_drop,
    )
