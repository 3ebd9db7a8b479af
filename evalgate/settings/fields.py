"""How a setting is read (token lengths with vLLM's suffixes, http(s) URLs, evalgate's and the
harness's variable names), and the configuration every group of settings shares.
"""

from __future__ import annotations

import typing
from typing import Any
from urllib.parse import urlsplit

from pydantic import AliasChoices, AliasGenerator, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from evalgate import numbers
from evalgate.engine.urls import redact_url
from evalgate.settings.environment import variables

TOKEN_LENGTHS = (
    "isl",
    "osl",
    "context_margin",
    "served_max_model_len",
    "eval_max_model_len",
    "max_tokens",
    "max_tokens_cap",
)
"""Settings in tokens: written as server arguments write them (8192, 8k = 8000, 8K = 8192)."""


def number_type(annotation: Any) -> type | None:
    """int or float for a numeric field's annotation (int | None too), else None."""
    kinds = [a for a in typing.get_args(annotation) or (annotation,) if a is not type(None)]
    return kinds[0] if len(kinds) == 1 and kinds[0] in (int, float) else None


def read_number(kind: type, text: str, tokens: bool) -> int | float:
    """A numeric setting's text read by evalgate's one rule (evalgate.numbers)."""
    if tokens:
        return numbers.tokens(text)
    return numbers.whole(text) if kind is int else numbers.real(text)


def check_url(url: str) -> str:
    """An http(s) URL with a host and a valid port; the message never repeats a password."""
    parts = urlsplit(url.strip())
    shown = redact_url(url)
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"{shown!r} has an invalid port; write http://HOST:PORT/v1") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{shown!r} is not an http(s) URL with a host; write http://HOST:PORT/v1")
    if parts.query or parts.fragment:  # /models and /chat/completions go after the path
        extra = ("?" + parts.query if parts.query else "") + (
            "#" + parts.fragment if parts.fragment else ""
        )
        raise ValueError(
            f"{shown!r} has a query or fragment ({extra}); evalgate appends /models and "
            "/chat/completions to the path, so drop it: write http://HOST:PORT/v1"
        )
    del port
    return url.strip()


def url_from_port(data: dict[str, Any]) -> str | None:
    port = data.get("port")
    return f"http://127.0.0.1:{port}/v1" if port else None


class Group(BaseSettings):
    """What every group of settings shares: the variables it is read from, frozen."""

    model_config = SettingsConfigDict(
        case_sensitive=True,  # API_KEY or isl in the environment are not evalgate's
        alias_generator=AliasGenerator(
            validation_alias=lambda name: AliasChoices(*variables(name))
        ),
        populate_by_name=True,  # keyword arguments use the field name
        use_attribute_docstrings=True,
        extra="ignore",
        frozen=True,
    )

    @field_validator("*", mode="before")
    @classmethod
    def _ascii_number(cls, value: Any, info: ValidationInfo) -> Any:
        """A number given as text (a flag, a variable) is read by one rule, whatever its
        field (evalgate.numbers); an empty text is left to the field (it means unset)."""
        field = str(info.field_name)
        kind = number_type(cls.model_fields[field].annotation)
        if kind is None or not isinstance(value, str) or not value.strip():
            return value
        return read_number(kind, value, field in TOKEN_LENGTHS)
