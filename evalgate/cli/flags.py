"""Command-line flags generated from the Settings model, so the two never drift; only the flags
typed reach Settings, so a flag beats the environment, which beats the default (docs/settings.md).
"""

from __future__ import annotations

import argparse
import types
import typing
from collections.abc import Collection
from pathlib import Path
from typing import Any

from pydantic import SecretStr, ValidationError

from evalgate import numbers, scrub
from evalgate.engine.urls import redact_url
from evalgate.errors import UsageError
from evalgate.settings.environment import variables
from evalgate.settings.evidence import EvidenceSettings
from evalgate.settings.values import Settings, credentials

FLAG_NAMES = {"model_config_path": "model-config", "worker_urls": "worker-url"}
PROBE = ("strict", "max_attempts", "timeout", "chat_template_kwargs", "reasoning_effort")
HOOK = ("concurrency", "layout")
EVAL = (
    "num_concurrent",
    "think_end_marker",
    "think_start_marker",
    "sglang_simulate_acc_len",
    "allow_simulated_acceptance",
    "max_failed_requests",
    "max_truncated_rate",
    *(name for name in EvidenceSettings.model_fields if name not in HOOK),  # the gate, evidence
)
LEFT_OUT = {"context": (*PROBE, *EVAL, *HOOK), "probe": (*EVAL, *HOOK), "run": HOOK, "hook": ()}
"""Per command, the settings of the stages after the ones it runs: `evalgate context` takes every
flag but those of the probe, the eval and the hook (only `evalgate hook` takes HOOK's)."""


def flag_name(field: str) -> str:
    return "--" + FLAG_NAMES.get(field, field.replace("_", "-"))


def _default(field: str) -> Any:
    """A field's default as the help and docs/settings.md show it (None when it is derived from
    another field, as base_url from port)."""
    info = Settings.model_fields[field]
    if info.default_factory_takes_validated_data:
        return None
    return info.get_default(call_default_factory=True)


def _help(field: str) -> str:
    info = Settings.model_fields[field]
    text = " ".join((info.description or "").split())
    default = _default(field)
    if default not in (None, [], False) and not isinstance(default, SecretStr):
        text += f" (default: {default})"
    if span := value_range(field):
        text += f" (range: {span})"
    text += " [env: " + ", ".join(variables(field)) + "]"
    return text.replace("%", "%%")


def _base_type(annotation: Any) -> Any:
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated or (origin in (typing.Union, types.UnionType) and len(args) == 1):
        return _base_type(args[0])  # Annotated[X, ...] and X | None: X
    return annotation


def value_range(field: str) -> str:
    """A numeric field's range as its help and its errors state it ('1 to 65,535'; '' for
    others), from the bounds on the field itself."""
    bounds = {}
    for item in Settings.model_fields[field].metadata:
        for name in ("ge", "gt", "le", "lt"):
            if getattr(item, name, None) is not None:
                bounds[name] = getattr(item, name)
    low, high = bounds.get("ge", bounds.get("gt")), bounds.get("le", bounds.get("lt"))
    if low is None or high is None:
        return ""
    return numbers.span(low, high, above="gt" in bounds, below="lt" in bounds)


def add_settings_arguments(parser: argparse.ArgumentParser, without: Collection[str] = ()) -> None:
    """Add one flag per settings field but those `without`; defaults stay in Settings."""
    for field in [name for name in Settings.model_fields if name not in without]:
        annotation = _base_type(Settings.model_fields[field].annotation)
        kwargs: dict[str, Any] = {"dest": field, "default": argparse.SUPPRESS, "help": _help(field)}
        origin = typing.get_origin(annotation)
        if annotation is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        elif origin is list:
            kwargs["action"] = "append"
            kwargs["metavar"] = "VALUE"
        elif origin is typing.Literal:
            kwargs["choices"] = list(typing.get_args(annotation))
        elif annotation in (int, float):  # the text goes to Settings: one rule for flags and
            kwargs["metavar"] = "N"  # variables (evalgate.numbers)
        elif annotation is Path:
            kwargs["metavar"] = "PATH"
        else:
            kwargs["metavar"] = "VALUE"
        parser.add_argument(flag_name(field), **kwargs)


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Settings from the typed flags, the environment and defaults; errors name the flag."""
    given = {k: v for k, v in vars(args).items() if k in Settings.model_fields}
    try:
        settings = Settings(**given)
    except ValidationError as exc:
        # no settings yet, but the error may quote a flag's secret elsewhere (a key in a query)
        scrub.add(given.get("api_key"), "the API key")
        for url in [given.get("base_url"), *(given.get("worker_urls") or [])]:
            scrub.add_url(url, "--base-url or --worker-url")
        by_name = {name: field for field in Settings.model_fields for name in variables(field)}
        problems = []
        for error in exc.errors():
            name = str(error["loc"][0]) if error["loc"] else "?"
            field = name if name in Settings.model_fields else by_name.get(name)
            if field is None:
                problems.append(f"{name}: {error['msg']}")
                continue
            value = _shown(field, error.get("input"))
            where = " or ".join([flag_name(field), *variables(field)])
            problems.append(
                f"{flag_name(field)} = {value!r} (set by {where}): {_reason(field, error)}"
            )
        raise UsageError("Invalid settings: " + "; ".join(problems) + ".") from None
    # the top of the command: from here on, outputs are scrubbed
    scrub.configure(*credentials(settings))
    return settings


def _reason(field: str, error: Any) -> str:
    """pydantic's message, a bound broken said as the field's range."""
    if error["type"] in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        return f"out of range: give {value_range(field)}"
    return str(error["msg"]).removeprefix("Value error, ")


def _shown(field: str, value: Any) -> Any:
    """A rejected value as the error message may repeat it: never a secret."""
    if field == "api_key":
        return "<hidden>"
    if field == "base_url" and isinstance(value, str):
        return redact_url(value)
    if field == "worker_urls" and isinstance(value, list):
        return [redact_url(v) if isinstance(v, str) else v for v in value]
    return value


def settings_table() -> str:
    """docs/settings.md's table, generated from the field docstrings."""
    rows = ["| flag | environment | default | meaning |", "| --- | --- | --- | --- |"]
    for field, info in Settings.model_fields.items():
        default = _default(field)
        shown = "" if default in (None, []) else f"`{default}`"
        text = " ".join((info.description or "").split()).replace("|", "\\|")
        if span := value_range(field):
            text += f" Range: {span}."
        env = ", ".join(f"`{name}`" for name in variables(field))
        rows.append(f"| `{flag_name(field)}` | {env} | {shown} | {text} |")
    return "\n".join(rows) + "\n"
