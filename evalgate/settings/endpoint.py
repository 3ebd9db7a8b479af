"""Where the engine is: the endpoint, the model's names, the key, the API, the workers."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import NoDecode

from evalgate.settings.fields import Group, check_url, url_from_port


class EndpointSettings(Group):
    port: int | None = Field(None, ge=1, le=65535)
    """The engine's port on this host, as the benchmark harness gives it: without a base URL,
    the endpoint is http://127.0.0.1:PORT/v1."""

    base_url: str | None = Field(default_factory=url_from_port, repr=False)
    """OpenAI-compatible endpoint the eval talks to, ending in /v1 (the router's, in a
    disaggregated job)."""

    model: str | None = None
    """The model: the key for thresholds and the config, and the name sent in every request
    unless --served-model-name gives another."""

    served_model_name: str | None = None
    """The name the engine serves the model under, sent in every request and looked for in
    /v1/models (the benchmark harness's MODEL_NAME, preferred over MODEL there; default:
    --model)."""

    api_key: SecretStr | None = Field(None, repr=False)
    """Bearer token for the endpoint. Never printed or stored, nor anything the engine says
    back holding it (a placeholder such as EMPTY is no secret; one under 4 characters is sent
    but cannot be scrubbed, and is warned of)."""

    api: Literal["chat", "completions"] = "chat"
    """Which API the eval uses: chat (the benchmark harness's protocol: chat template, 5-shot
    as turns) or completions (lm-eval's standard 5-shot gsm8k prompt)."""

    worker_urls: Annotated[list[str], NoDecode] = Field(default_factory=list, repr=False)
    """Prefill/decode worker URLs (…/v1) whose /v1/models limits also clamp the context.
    Repeatable flag; comma-separated in the environment."""

    @field_validator("worker_urls", mode="before")
    @classmethod
    def _split_urls(cls, value: Any) -> Any:
        """In the environment, several URLs are separated by commas."""
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

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
