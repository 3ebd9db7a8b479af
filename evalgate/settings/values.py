"""The Settings model: every setting of every command, in groups (a stage receives its group,
itself), each one a flag, an environment variable and a config file's key (docs/settings.md).
Which settings each command takes: COMMANDS; how they are read: settings/sources.py.
"""

from __future__ import annotations

import os
import typing
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, model_validator
from pydantic.fields import FieldInfo

from evalgate.environment import variables
from evalgate.settings.context import ContextSettings
from evalgate.settings.endpoint import EndpointSettings, NetworkSettings
from evalgate.settings.evaluation import EvalSettings
from evalgate.settings.fields import Flag, Group
from evalgate.settings.gate import GateSettings, LabelsSettings
from evalgate.settings.output import HistorySettings, OutputSettings


class Settings(BaseModel):
    """Everything an evalgate command can be told. Built from keywords, it takes each setting
    by its own name (Settings(base_url=..., isl=1024)) as well as by group, over what the
    environment sets (a command's flags and config file: settings/sources.py)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    endpoint: EndpointSettings = Field(default_factory=EndpointSettings)
    context: ContextSettings = Field(default_factory=ContextSettings)
    eval: EvalSettings = Field(default_factory=EvalSettings)
    gate: GateSettings = Field(default_factory=GateSettings)
    labels: LabelsSettings = Field(default_factory=LabelsSettings)
    output: OutputSettings = Field(default_factory=OutputSettings)
    history: HistorySettings = Field(default_factory=HistorySettings)

    @model_validator(mode="before")
    @classmethod
    def _grouped(cls, data: Any, info: ValidationInfo) -> Any:
        """Each setting given by its own name, put in its group, over the environment's (the
        environment in `info.context`, else this process's)."""
        if not isinstance(data, dict):
            return data
        environ = (info.context or {}).get("environ", os.environ)
        found = {name: value for name, (_, value) in environment(environ).items()}
        return grouped(found | data)

    @model_validator(mode="after")
    def _baseline_not_with_early_stop(self) -> Settings:
        baseline, early_stop = self.gate.baseline, self.eval.early_stop
        if baseline is not None and early_stop != "off":
            raise ValueError(
                f"a run stopped early cannot be compared with --baseline {baseline} (its "
                "questions were chosen by its own answers); use --early-stop off to compare, or "
                "drop --baseline"
            )
        return self

    def but(self, **values: Any) -> Settings:
        """These settings with `values` (by their own names) in place of theirs, unchecked:
        for values a command computes, such as the hook's folder for each concurrency."""
        changed = self
        for name, value in values.items():
            changed = _replaced(changed, SETTINGS[name].path, value)
        return changed


M = typing.TypeVar("M", bound=BaseModel)


def _replaced(model: M, path: tuple[str, ...], value: Any) -> M:
    inner = _replaced(getattr(model, path[0]), path[1:], value) if path[1:] else value
    return model.model_copy(update={path[0]: inner})


GROUPS: tuple[type[Group], ...] = (
    EndpointSettings,
    ContextSettings,
    EvalSettings,
    GateSettings,
    LabelsSettings,
    NetworkSettings,
    OutputSettings,
    HistorySettings,
)
"""The groups in the order --help and docs/settings.md show them: the everyday ones first."""


class Setting(NamedTuple):
    """One setting: its name, where it sits in Settings, its group and its field."""

    name: str
    path: tuple[str, ...]
    group: type[Group]
    info: FieldInfo

    @property
    def flag(self) -> Flag:
        """How it is spelled on the command line (Flag() when its name says it all)."""
        return next((m for m in self.info.metadata if isinstance(m, Flag)), Flag())

    @property
    def option(self) -> str:
        """Its long flag: --base-url, --model-config."""
        return "--" + (self.flag.name or self.name.replace("_", "-"))

    @property
    def bounds(self) -> tuple[float, float, bool, bool] | None:
        """A numeric setting's range, as numbers.within takes it: (low, high, low excluded,
        high excluded); None for others."""
        found = {
            name: getattr(item, name)
            for item in self.info.metadata
            for name in ("ge", "gt", "le", "lt")
            if getattr(item, name, None) is not None
        }
        low, high = found.get("ge", found.get("gt")), found.get("le", found.get("lt"))
        if low is None or high is None:
            return None
        return low, high, "gt" in found, "lt" in found

    @property
    def variables(self) -> tuple[str, ...]:
        """The environment variables it is read from, in the order they are looked up."""
        return variables(self.name)


def _settings(model: type[BaseModel], path: tuple[str, ...]) -> Iterator[Setting]:
    for name, info in model.model_fields.items():
        kind = info.annotation
        if isinstance(kind, type) and issubclass(kind, Group):
            yield from _settings(kind, (*path, name))
        elif issubclass(model, Group):
            yield Setting(name, (*path, name), model, info)


SETTINGS: dict[str, Setting] = {s.name: s for s in _settings(Settings, ())}
"""Every setting by its own name."""


def grouped(flat: dict[str, Any]) -> dict[str, Any]:
    """Settings given by their own names (isl=1024) put in their groups; a group given whole
    (context={...}) is kept."""
    nested: dict[str, Any] = {}
    for name, value in flat.items():
        setting = SETTINGS.get(name)
        if setting is None:
            nested[name] = value
            continue
        holder = nested
        for step in setting.path[:-1]:
            holder = holder.setdefault(step, {})
        holder[name] = value
    return nested


def environment(environ: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """Each setting an environment sets: (the variable that set it, its text), the first of
    its variables that is set winning (EVALGATE_ISL over ISL)."""
    found = {}
    for setting in SETTINGS.values():
        variable = next((v for v in setting.variables if v in environ), None)
        if variable is not None:
            found[setting.name] = (variable, environ[variable])
    return found


def value_of(settings: Settings, name: str) -> Any:
    """A setting's value by its own name (for messages and --print-config)."""
    found: Any = settings
    for step in SETTINGS[name].path:
        found = getattr(found, step)
    return found


def _of(group: type[Group], *names: str, without: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The named settings of `group` (all when none is named), but those `without`."""
    own = [s.name for s in SETTINGS.values() if s.group is group]
    for name in (*names, *without):
        if name not in own:
            raise KeyError(f"{group.__name__} has no setting {name}")
    return tuple(n for n in own if (not names or n in names) and n not in without)


_ENGINE = (*_of(EndpointSettings), *_of(NetworkSettings))
_CONTEXT = (
    *_of(EndpointSettings),
    *_of(NetworkSettings, without=("timeout", "max_attempts")),
    *_of(ContextSettings, without=("strict",)),
    *_of(EvalSettings, "task", "limit", "dataset_dir", "dataset_hub", "eval_tasks_dir"),
)
_RUN = (
    *_ENGINE,
    *_of(ContextSettings),
    *_of(EvalSettings, without=("concurrency",)),
    *_of(GateSettings, "thresholds", "min_samples", "max_truncated_rate", "baseline", "max_drop"),
    *_of(LabelsSettings),
    *_of(OutputSettings, "output_dir", "overwrite", "resume"),
)
COMMANDS: dict[str, frozenset[str]] = {
    "run": frozenset((*_RUN, "json_file")),
    "hook": frozenset((*_RUN, "concurrency", "layout")),
    "context": frozenset((*_CONTEXT, *_of(OutputSettings, "format", "explain", "json_file"))),
    "probe": frozenset(
        (
            *_CONTEXT,
            *_of(ContextSettings, "strict"),
            *_of(NetworkSettings, "timeout", "max_attempts"),
            *_of(EvalSettings, "chat_template_kwargs", "reasoning_effort"),
            "json_file",
        )
    ),
    "verify": frozenset(
        (
            *_of(GateSettings, "thresholds", "min_samples", "expect", "baselines", "max_drop"),
            *_of(GateSettings, "waivers"),
            *_of(OutputSettings, "json_file", "junit", "html", "github", "quiet"),
            *_of(HistorySettings, "record", "sweep_id"),
        )
    ),
    "compare": frozenset(
        (
            *_of(GateSettings, "max_drop", "allow_protocol_drift"),
            *_of(OutputSettings, "json_file", "markdown", "html", "flips"),
        )
    ),
    "history": frozenset(
        (
            *_of(HistorySettings, without=("record", "sweep_id")),
            *_of(GateSettings, "thresholds"),
            *_of(OutputSettings, "json_file", "html"),
        )
    ),
}
"""The settings each command takes as flags (and prints with --print-config). Every command
reads every setting from the environment and the config file, so that a value out of its
range is refused wherever it is given, as each is read by the one model."""

NAMED: dict[str, tuple[tuple[str, str], ...]] = {
    "run": (("resume", "output_dir"), ("overwrite", "output_dir")),
}
"""Settings of a command that need another one named (by a flag, a variable or the config
file), not left at its default: (the setting, the one it needs). `run` with no --output-dir
writes into a fresh folder, where there is nothing to continue or replace."""

EXCLUSIVE: dict[str, tuple[tuple[str, ...], ...]] = {
    "history": (("mark_run", "mark_sweep", "delete_sweep"),),
}
"""Settings of a command that go apart: at most one of each set may be given."""


def credentials(settings: Settings) -> tuple[list[str | None], list[str | None]]:
    """A command's secrets for scrub.configure: its API key, and --base-url and every
    --worker-url (their user info)."""
    endpoint = settings.endpoint
    return [endpoint.key], [endpoint.base_url, *endpoint.worker_urls]
