"""How requests are sent (readiness, the probe, retries, connections) and how the eval runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, ValidationInfo, field_validator
from pydantic_settings import NoDecode

from evalgate.numbers import (
    ATTEMPTS_MAX,
    CONCURRENCY_MAX,
    COUNT_MAX,
    KEEPALIVE_PROBES_MAX,
    KEEPALIVE_SECONDS_MAX,
    RESPONSE_BYTES_MAX,
    SECONDS_MAX,
    USER_TIMEOUT_MS_MAX,
    concurrencies,
)
from evalgate.settings.fields import Group


class RequestSettings(Group):
    ready_timeout: float = Field(600.0, ge=0, le=SECONDS_MAX)
    """Seconds to wait for the endpoint to answer /v1/models before giving up."""

    discovery_timeout: float = Field(30.0, gt=0, le=SECONDS_MAX)
    """Seconds one side-door request may take, first byte to last: /readiness, /v1/models,
    /tokenize, /version (never past --ready-timeout), a worker's /v1/models, and each poll of the
    workers during the eval."""

    connect_timeout: float = Field(30.0, gt=0, le=SECONDS_MAX)
    """Seconds to wait for a TCP connection to the engine, the router or a worker: a host that
    does not answer within it has stopped answering."""

    keepalive_idle: float = Field(30.0, ge=1, le=KEEPALIVE_SECONDS_MAX)
    """Seconds a connection may be silent before TCP keepalive probes start (every connection:
    a host that vanished without closing it is found without waiting for --timeout)."""

    keepalive_interval: float = Field(10.0, ge=1, le=KEEPALIVE_SECONDS_MAX)
    """Seconds between TCP keepalive probes; also how often the workers are polled during the
    eval (--worker-url)."""

    keepalive_probes: int = Field(3, ge=1, le=KEEPALIVE_PROBES_MAX)
    """Keepalive probes unanswered before a connection is dropped: a host that answers nothing
    for --keepalive-idle + --keepalive-interval x this (60 s by default; TCP_USER_TIMEOUT) has
    stopped answering, and so has a worker no poll reached for as long."""

    max_response_bytes: int = Field(16 << 20, ge=1024, le=RESPONSE_BYTES_MAX)
    """Largest answer read from an engine, decoded (after gzip): a longer one is cut there and
    counts as a failed request, said so."""

    retry_wait_min: float = Field(1.0, ge=0, le=SECONDS_MAX)
    """First backoff wait in seconds between retries of a retryable failure."""

    retry_wait_max: float = Field(10.0, ge=0, le=SECONDS_MAX)
    """Longest backoff wait in seconds."""

    strict: bool = False
    """Treat a budget that would truncate answers (prompt + budget > served) as an error."""

    num_concurrent: int = Field(64, ge=1, le=CONCURRENCY_MAX)
    """Requests in flight during the eval."""

    limit: int | None = Field(None, ge=1, le=COUNT_MAX)
    """Evaluate only the first N questions (for smoke tests; too small to gate on)."""

    concurrency: str | None = None
    """`evalgate hook`: the concurrencies to evaluate one after another on the same live engine
    (one probe), e.g. "4 8" or 16,64,256; each gets its own result. Default: --num-concurrent."""

    timeout: float = Field(1800.0, gt=0, le=SECONDS_MAX)
    """Seconds one generation request may take, first byte to last (the probe: at most 60 s to
    its first token)."""

    max_attempts: int = Field(5, ge=1, le=ATTEMPTS_MAX)
    """Attempts per request for retryable failures (connection errors, 408, 429, 5xx)."""

    chat_template_kwargs: Annotated[dict[str, Any] | None, NoDecode] = None
    """A JSON object sent as chat_template_kwargs in every request, the probe's included, and
    recorded in the result (e.g. '{"enable_thinking": false}' to turn a model's thinking off)."""

    reasoning_effort: str | None = None
    """Sent as reasoning_effort in every request, the probe's included, and recorded (low,
    medium or high for models that take it, e.g. gpt-oss)."""

    max_failed_requests: int = Field(0, ge=0, le=COUNT_MAX)
    """Requests allowed to fail for good before the run is an error (0: any failure is)."""

    max_truncated_rate: float = Field(1.0, ge=0, le=1)
    """Share of answers that may end by length or come back empty before the run fails
    (1.0: report only)."""

    task: str = "gsm8k"
    """The task to gate: gsm8k (the harness's GSM8K), gpqa_diamond_cot_n_shot (the harness's
    GPQA-diamond, its data in --dataset-dir), or the path of an lm-eval task YAML of
    generate_until type with {{field}} templates and local JSONL data files; the threshold is
    the one for this task (a file's: its task name). Loglikelihood tasks are refused."""

    dataset_dir: Path | None = None
    """Folder with the task's data: GSM8K's test.jsonl and train.jsonl (instead of the copy
    evalgate ships), or GPQA-diamond's gpqa_diamond.csv (or .jsonl), which cannot ship."""

    dataset_hub: bool = False
    """Load openai/gsm8k from the Hugging Face hub instead of the shipped copy."""

    eval_tasks_dir: Path | None = None
    """The benchmark harness's eval task file. evalgate runs its own copy of the harness's
    gsm8k task: `evalgate hook` warns when this names another file (other tasks are not run)."""

    sglang_simulate_acc_len: str | None = None
    """SGLang's simulated speculative acceptance length, as the job sets it: anything but empty
    or 0 means the engine fakes which draft tokens it accepts, and the gate refuses (exit 2).
    Give it when the engine's environment holds it but the gate's does not."""

    allow_simulated_acceptance: bool = False
    """Gate even when acceptance is simulated (SGLANG_SIMULATE_ACC_LEN, or
    --spec-decode-acceptance-length in the server arguments): the scores then say nothing about
    the model; the result's warnings record it."""

    think_end_marker: str = "</think>"
    """The end of a reasoning model's thinking written into its answer (no reasoning parser):
    only the text after its last occurrence is scored. Empty: score the whole answer, as the
    benchmark harness does."""

    think_start_marker: str = "<think>"
    """The start of thinking written into the answer: an answer holding it but never reaching
    --think-end-marker was cut while thinking, and scores nothing. Empty: no such check."""

    @field_validator("retry_wait_max")
    @classmethod
    def _waits_in_order(cls, value: float, info: ValidationInfo) -> float:
        low = info.data.get("retry_wait_min")
        if isinstance(low, float | int) and value < low:
            raise ValueError(
                f"the longest backoff wait is below --retry-wait-min {low:g}: give "
                "--retry-wait-max at least --retry-wait-min"
            )
        return value

    @field_validator("keepalive_probes")
    @classmethod
    def _silence_fits(cls, value: int, info: ValidationInfo) -> int:
        """The kernel takes TCP_USER_TIMEOUT (idle + interval x probes) in milliseconds up to
        2^31 - 1: past it every connection would fail with EINVAL."""
        idle, interval = info.data.get("keepalive_idle"), info.data.get("keepalive_interval")
        if not isinstance(idle, float | int) or not isinstance(interval, float | int):
            return value  # refused on their own
        silence = round((idle + interval * value) * 1000)
        if silence > USER_TIMEOUT_MS_MAX:
            raise ValueError(
                f"--keepalive-idle {idle:g} + --keepalive-interval {interval:g} x "
                f"--keepalive-probes {value} is {silence:,} ms, past the kernel's TCP_USER_TIMEOUT "
                f"range (0 to {USER_TIMEOUT_MS_MAX:,} ms): make one of them smaller"
            )
        return value

    @field_validator("concurrency")
    @classmethod
    def _concurrencies(cls, value: str | None) -> str | None:
        if value is not None:
            concurrencies(value)
        return value

    @field_validator("chat_template_kwargs", mode="before")
    @classmethod
    def _json_object(cls, value: Any) -> Any:
        """Given as text (a flag, a variable), the value is a JSON object."""
        if not isinstance(value, str):
            return value
        if not value.strip():
            return None
        from evalgate.errors import ArtifactError
        from evalgate.evidence.read import decode

        example = '{"enable_thinking": false}'
        try:  # the one reader: a repeated key, or an integer past what a float holds, refused
            parsed = decode(value, dict[str, Any], "the value", "is not a JSON object")
            json.dumps(parsed, allow_nan=False)  # each request body carries it: JSON, no NaN
        except ArtifactError as exc:
            raise ValueError(f"{exc.message.rstrip('.')}; give one such as '{example}'") from exc
        except ValueError as exc:
            raise ValueError(
                f"holds NaN or Infinity, which are not JSON; give e.g. '{example}'"
            ) from exc
        return parsed
