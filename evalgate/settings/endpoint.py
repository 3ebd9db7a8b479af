"""Where the engine is (the endpoint, the model's names, the key, the API, the workers) and how
every request to it is sent (deadlines, retries, connections): the stages that talk to the
engine receive this group, itself."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr, ValidationInfo, field_validator, model_validator

from evalgate import numbers
from evalgate.errors import UsageError
from evalgate.numbers import (
    ATTEMPTS_MAX,
    KEEPALIVE_PROBES_MAX,
    KEEPALIVE_SECONDS_MAX,
    RESPONSE_BYTES_MAX,
    SECONDS_MAX,
    USER_TIMEOUT_MS_MAX,
)
from evalgate.settings.fields import Flag, Group, Texts, check_url

PORT_MAX = 65_535


class NetworkSettings(Group):
    """Deadlines, retries and what every connection is given (engine.urls.Network)."""

    heading = "network and retries"

    ready_timeout: float = Field(600.0, ge=0, le=SECONDS_MAX)
    """Seconds to wait for the endpoint to answer /v1/models before giving up."""

    timeout: float = Field(1800.0, gt=0, le=SECONDS_MAX)
    """Seconds one generation request may take, first byte to last (the probe: at most 60 s to
    its first token)."""

    max_attempts: int = Field(5, ge=1, le=ATTEMPTS_MAX)
    """Attempts per request for retryable failures (connection errors, 408, 429, 5xx)."""

    retry_wait_min: float = Field(1.0, ge=0, le=SECONDS_MAX)
    """First backoff wait in seconds between retries of a retryable failure."""

    retry_wait_max: float = Field(10.0, ge=0, le=SECONDS_MAX)
    """Longest backoff wait in seconds."""

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

    @property
    def silence_limit(self) -> float:
        """Seconds a connection may go unanswered before the kernel drops it (TCP_USER_TIMEOUT):
        the idle time plus every keepalive probe."""
        return self.keepalive_idle + self.keepalive_interval * self.keepalive_probes

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


class EndpointSettings(Group):
    """Where the engine is, and (network) how every request to it is sent."""

    heading = "endpoint"

    base_url: str | None = Field(None, repr=False)
    """OpenAI-compatible endpoint the eval talks to, ending in /v1 (the router's, in a
    disaggregated job)."""

    model: str | None = None
    """The model: the key for thresholds and the config, and the name sent in every request
    unless --served-model-name gives another."""

    api: Literal["chat", "completions"] = "chat"
    """Which API the eval uses: chat (the benchmark harness's protocol: chat template, 5-shot
    as turns) or completions (lm-eval's standard 5-shot gsm8k prompt)."""

    api_key: SecretStr | None = Field(None, repr=False)
    """Bearer token for the endpoint. Never printed or stored, nor anything the engine says
    back holding it (a placeholder such as EMPTY is no secret; one under 4 characters is sent
    but cannot be scrubbed, and is warned of)."""

    served_model_name: str | None = None
    """The name the engine serves the model under, sent in every request and looked for in
    /v1/models (the benchmark harness's MODEL_NAME, preferred over MODEL there; default:
    --model)."""

    port: int | None = Field(None, ge=1, le=PORT_MAX)
    """The engine's port on this host, as the benchmark harness gives it: without a base URL,
    the endpoint is http://127.0.0.1:PORT/v1."""

    worker_urls: Annotated[Texts, Flag("worker-url")] = Field(default_factory=list, repr=False)
    """Prefill/decode worker URLs (…/v1) whose /v1/models limits also clamp the context.
    Repeatable flag; comma-separated in the environment."""

    network: NetworkSettings = Field(default_factory=NetworkSettings)

    @model_validator(mode="before")
    @classmethod
    def _url_from_port(cls, data: Any) -> Any:
        """No base URL given (not even an empty one) but a port: the engine on this host."""
        if not isinstance(data, dict) or "base_url" in data or data.get("port") in (None, ""):
            return data
        port = data["port"]
        try:
            number = numbers.whole(port) if isinstance(port, str) else port
        except ValueError:
            return data  # the port is refused on its own
        if type(number) is int and not numbers.within(number, 1, PORT_MAX):
            return {**data, "base_url": f"http://127.0.0.1:{number}/v1"}
        return data

    @field_validator("base_url", "worker_urls")
    @classmethod
    def _http_urls(cls, value: str | list[str] | None) -> str | list[str] | None:
        if isinstance(value, list):
            return [check_url(url) for url in value]
        return check_url(value) if value is not None else None

    @property
    def served_model(self) -> str | None:
        """The name requests carry: --served-model-name, else --model."""
        return self.served_model_name or self.model

    @property
    def key(self) -> str | None:
        """The API key's value, for the Authorization header alone."""
        return self.api_key.get_secret_value() if self.api_key is not None else None

    def require(self) -> None:
        """An engine to talk to: --base-url (or --port) and --model, else one message naming
        every one missing."""
        given = (("--base-url", self.base_url), ("--model", self.model))
        missing = [flag for flag, value in given if not value]
        if missing:
            flags = ", ".join(missing)
            raise UsageError(
                f"Missing {flags}: set the flag(s) or the matching environment variable(s) "
                "(see --help)."
            )
