"""Where each setting's value comes from: a flag, else an environment variable, else the config
file (--config, or $EVALGATE_CONFIG), else its default; read once, at the top of a command,
each value with where it came from (docs/settings.md, "Precedence").

The config file is YAML read by evalgate's one YAML reader (evalgate.reader: its size, depth
and aliases bounded), its numbers read by the one rule for numbers as a flag's are; its keys
are the long flags' names (base-url or base_url). A key that names no setting is refused with
the nearest one that does.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from evalgate import numbers, scrub
from evalgate.engine.urls import redact_url
from evalgate.errors import UsageError, YamlRefused
from evalgate.settings.fields import SAID
from evalgate.settings.values import (
    COMMANDS,
    EXCLUSIVE,
    NAMED,
    SETTINGS,
    Setting,
    Settings,
    environment,
    value_of,
)

CONFIG_VARIABLE = "EVALGATE_CONFIG"
"""The config file's path when --config is not given."""
DEFAULT = "default"


@dataclass(frozen=True)
class Loaded:
    """The settings a command runs with, and where each came from."""

    settings: Settings
    origins: dict[str, str]
    """Per setting given: its flag (--isl), its variable (ISL) or the config file's path; those
    not given hold their default."""

    def origin(self, name: str) -> str:
        return self.origins.get(name, DEFAULT)

    def named(self, name: str) -> bool:
        """Whether a flag, a variable or the config file gave the setting (not its default)."""
        return name in self.origins


def load(
    command: str | None,
    flags: Mapping[str, Any],
    *,
    config: str | None = None,
    environ: Mapping[str, str] = os.environ,
) -> Loaded:
    """The settings of `command` (None: any), from the flags typed (`flags`, by setting),
    the environment, the config file and the defaults, in that order of precedence. Every
    setting is read from the environment and the file, so that one out of its range is refused
    by every command alike. Raises UsageError naming each setting refused, its value and where
    it came from."""
    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    path = config or environ.get(CONFIG_VARIABLE) or None
    if path is not None:
        for name, value in read_config(path, command).items():
            values[name], origins[name] = value, path
    for name, (variable, text) in environment(environ).items():
        values[name], origins[name] = text, variable
    for name, value in flags.items():
        values[name], origins[name] = value, SETTINGS[name].option
    try:
        settings = Settings.model_validate(values, context={"environ": environ, "command": command})
    except ValidationError as exc:
        # no settings yet, but the error may quote a secret elsewhere (a key in a query)
        scrub.add(_text(values.get("api_key")), "the API key")
        for url in [values.get("base_url"), *(values.get("worker_urls") or [])]:
            scrub.add_url(_text(url), "--base-url or --worker-url")
        errors = exc.errors()
        problems = [_problem(error, path, origins) for error in errors]
        if all(error["type"] == SAID for error in errors):  # each whole in its own words
            raise UsageError(" ".join(problems)) from None
        joined = "; ".join(problem.removesuffix(".") for problem in problems)
        raise UsageError(f"Invalid settings: {joined}.") from None
    loaded = Loaded(settings, origins)
    _check_apart(command, loaded)
    _check_named(command, loaded)
    return loaded


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _problem(error: Any, config: str | None, origins: Mapping[str, str]) -> str:
    """One refused value: its flag, the value (never a secret), where it may be set (the
    config file too, when one was read), and why; or a setting's own words, with where it was
    set when not by its flag."""
    name = next((str(step) for step in error["loc"] if str(step) in SETTINGS), None)
    reason = str(error["msg"]).removeprefix("Value error, ")
    if name is None:  # a rule between settings (the model's own)
        return reason
    setting = SETTINGS[name]
    if error["type"] == SAID:
        origin = origins.get(name, setting.option)
        return reason if origin == setting.option else f"{reason} It was set by {origin}."
    value = shown(setting, error.get("input"))
    if error["type"] in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        reason = f"out of range: give {value_range(setting)}"
    places = [setting.option, *setting.variables, *([config] if config else [])]
    value = scrub.capped(repr(value), 200)  # thousands of digits would hide the reason
    return f"{setting.option} = {value} (set by {' or '.join(places)}): {reason}"


def shown(setting: Setting, value: Any) -> Any:
    """A value as a message or --print-config may repeat it: never a secret."""
    if setting.name == "api_key":
        return "<hidden>" if value else value
    if setting.name == "base_url" and isinstance(value, str):
        return redact_url(value)
    if setting.name == "worker_urls" and isinstance(value, list):
        return [redact_url(v) if isinstance(v, str) else v for v in value]
    return value


def value_range(setting: Setting) -> str:
    """A numeric setting's range as its help and its errors state it ('1 to 65,535'; '' for
    others)."""
    if setting.bounds is None:
        return ""
    low, high, above, below = setting.bounds
    return numbers.span(low, high, above=above, below=below)


def _check_apart(command: str | None, loaded: Loaded) -> None:
    """Settings of the command that go apart (history's --mark-run and --delete-sweep),
    wherever each was given."""
    for names in EXCLUSIVE.get(command or "", ()):
        given = [n for n in names if value_of(loaded.settings, n)]
        if len(given) > 1:
            told = ", ".join(f"{SETTINGS[n].option} (set by {loaded.origin(n)})" for n in given)
            raise UsageError(f"{told} go apart: give one of them.")


def _check_named(command: str | None, loaded: Loaded) -> None:
    """Settings of the command that need another one named, not left at its default (run's
    --resume and --overwrite need --output-dir)."""
    for name, needs in NAMED.get(command or "", ()):
        if value_of(loaded.settings, name) and not loaded.named(needs):
            need = SETTINGS[needs]
            places = ", ".join((need.option, *need.variables))
            raise UsageError(
                f"{SETTINGS[name].option} (set by {loaded.origin(name)}) needs {need.option}: "
                "without it, each run writes into a fresh folder of its own, where there is "
                f"nothing to continue or replace. Name the run's folder with {places} or "
                f"`{need.option[2:]}:` in the config file."
            )


# -- the config file -----------------------------------------------------------------------------


def _keys() -> dict[str, list[Setting]]:
    """Each key a config file may use (the long flag's name, and the setting's own, with - or
    _), and the settings it may name (--baseline is a run's folder for one command, a sweep's
    for another)."""
    keys: dict[str, list[Setting]] = {}
    for setting in SETTINGS.values():
        for key in {setting.option[2:], setting.name.replace("_", "-")}:
            keys.setdefault(key, []).append(setting)
    return keys


def read_config(path: str, command: str | None) -> dict[str, Any]:
    """The config file's values by setting: YAML through evalgate's one reader, a mapping of
    settings, each key naming one (for `command`, where the key names one of several)."""
    from evalgate.reader import MAX_CHARS, load_yaml, read_bytes

    what = f"The config file {path}"
    try:
        text = read_bytes(path, MAX_CHARS).decode("utf-8")
        data = load_yaml(text, numbers_as_text=True)
    except UnicodeDecodeError as exc:
        raise UsageError(f"{what} is not UTF-8 text ({exc.reason} at byte {exc.start}).") from exc
    except YamlRefused as exc:
        raise UsageError(f"{what} {exc.message}.") from exc
    except UsageError as exc:  # unreadable: gone, not a regular file, too big
        raise UsageError(f"{exc.message} Pass --config with a YAML file of settings.") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError(
            f"{what} holds a {type(data).__name__}, not a mapping of settings: write one "
            "setting a line, as `base-url: http://127.0.0.1:8000/v1`."
        )
    keys = _keys()
    takes: Collection[str] = COMMANDS.get(command or "", SETTINGS)
    found: dict[str, Any] = {}
    for key, value in data.items():
        named = keys.get(key.replace("_", "-"))
        if named is None:
            nearest = difflib.get_close_matches(key.replace("_", "-"), keys, n=1, cutoff=0)
            raise UsageError(
                f"{what} has the key {key!r}, which is no setting: did you mean "
                f"{nearest[0]!r}? Its keys are the long flags' names (see --help)."
            )
        setting = next((s for s in named if s.name in takes), named[0] if len(named) == 1 else None)
        if setting is None:  # a flag of other commands, each taking it as its own setting
            continue
        if setting.name in found:
            raise UsageError(
                f"{what} gives {setting.option} twice ({key!r} and another spelling): keep one."
            )
        found[setting.name] = value
    return found
