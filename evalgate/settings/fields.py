"""How a setting is read (token lengths with vLLM's suffixes, http(s) URLs, an empty variable),
how it is named on the command line, and the configuration every group of settings shares.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationInfo, field_validator

from evalgate import numbers
from evalgate.engine.urls import redact_url

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

BLANK_MEANS: dict[str, Any] = {
    **dict.fromkeys(("base_url", "model", "port", "served_model_name", "limit", "concurrency")),
    **dict.fromkeys(("eval_tasks_dir", "spec_decoding", "result_filename", "thresholds")),
    **dict.fromkeys(("baseline", "baselines", "expect", "waivers", "github", "junit", "json_file")),
    **dict.fromkeys(("html", "record", "sweep_id", "mark_run", "mark_sweep", "delete_sweep")),
    **dict.fromkeys(("reason", "by", "fit_thresholds", "policy")),
    "is_multinode": False,
}
"""What a setting given as an empty text holds: a job script's empty variable (EVAL_LIMIT="")
means unset, as in the benchmark harness. (Some settings give the empty text a meaning of
their own, said in their help: --think-end-marker, ISL; an empty --output-dir is refused.)"""


SAID = "said"
"""The type of a settings error whose message is whole as it stands (where it was set is
added only when not by its flag)."""


@dataclass(frozen=True)
class Flag:
    """How a setting is spelled on the command line, where its field's name is not enough
    (``Annotated[str | None, Flag("json", metavar="FILE")]``)."""

    name: str | None = None
    """The long flag without its dashes (default: the field's name, - for _)."""
    short: str | None = None
    """A one-letter flag besides it (-q)."""
    metavar: str | None = None
    """What the help calls its value (default: by its type: N, PATH, VALUE)."""


def number_type(annotation: Any) -> type | None:
    """int or float for a numeric field's annotation (int | None too), else None."""
    kinds = [a for a in typing.get_args(annotation) or (annotation,) if a is not type(None)]
    return kinds[0] if len(kinds) == 1 and kinds[0] in (int, float) else None


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
        extra = urlunsplit(("", "", "", parts.query, parts.fragment))
        raise ValueError(
            f"{shown!r} has a query or fragment ({extra}); evalgate appends /models and "
            "/chat/completions to the path, so drop it: write http://HOST:PORT/v1"
        )
    del port
    return url.strip()


def split_list(value: Any) -> Any:
    """A list given as one text (a variable, a config file's string): comma-separated."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


Texts = Annotated[list[str], BeforeValidator(split_list)]
"""A list of texts: repeatable as a flag, comma-separated in a variable or a config file's
string."""


class Group(BaseModel):
    """A group of settings: frozen, documented by its fields' docstrings, shown under its
    `heading` in --help and docs/settings.md. A stage receives the group it needs, itself."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True, extra="forbid")

    heading: ClassVar[str]
    """The group's title in --help and docs/settings.md."""

    @field_validator("*", mode="before")
    @classmethod
    def _read_text(cls, value: Any, info: ValidationInfo) -> Any:
        """A setting given as text (a flag, a variable, a config file's number): an empty one
        means unset where BLANK_MEANS says so; a number is read by one rule, whatever its
        field (evalgate.numbers)."""
        field = str(info.field_name)
        if isinstance(value, bool) and number_type(cls.model_fields[field].annotation):
            # a config file's `true`, `yes` or `on`, which pydantic would take as 1
            raise ValueError(f"{str(value).lower()} is no number; write a number, e.g. 16")
        if not isinstance(value, str):
            return value
        if not value.strip():
            return BLANK_MEANS.get(field, value)
        kind = number_type(cls.model_fields[field].annotation)
        if kind is None:
            return value
        if field in TOKEN_LENGTHS:
            return numbers.tokens(value)
        return numbers.whole(value) if kind is int else numbers.real(value)
