"""Command-line flags generated from the Settings model, so the two never drift: one flag per
setting a command takes (settings.values.COMMANDS), in argparse groups as the model groups
them; only the flags typed reach the settings, so a flag beats the environment, which beats
the config file, which beats the default (docs/settings.md). Also the table of docs/settings.md,
--print-config's listing, and the one --json rule (FILE, or - for stdout) every command keeps.
"""

from __future__ import annotations

import argparse
import types
import typing
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from evalgate import numbers, scrub
from evalgate.cli.habits import SUBCOMMANDS
from evalgate.errors import UsageError
from evalgate.settings.sources import CONFIG_VARIABLE, Loaded, load, shown, value_range
from evalgate.settings.values import COMMANDS, GROUPS, SETTINGS, Setting, Settings, credentials
from evalgate.templates import line

CONFIG_HEADING = "configuration"
READ_AT_THE_FLAG = {"verify": ("min_samples",), "compare": ("flips",), "history": ("last",)}
"""Numeric flags argparse reads itself (by the one rule, in the setting's range), as these
commands always did: a bad one is refused as the flag is read ("argument --last: ..."). Every
other number goes to the settings as text, refused with any other bad setting in one message."""


def flag_name(field: str) -> str:
    """A setting's long flag (--base-url, --model-config)."""
    return SETTINGS[field].option


def _default(setting: Setting) -> Any:
    """A setting's default as the help and docs/settings.md show it."""
    return setting.info.get_default(call_default_factory=True)


def _meaning(setting: Setting) -> str:
    return " ".join((setting.info.description or "").split())


def _help(setting: Setting) -> str:
    text = _meaning(setting)
    default = _default(setting)
    if default not in (None, [], False) and not isinstance(default, SecretStr):
        text += f" (default: {default})"
    if span := value_range(setting):
        text += f" (range: {span})"
    text += " [env: " + ", ".join(setting.variables) + "]"
    return text.replace("%", "%%")


def base_type(annotation: Any) -> Any:
    """X of X | None and of Annotated[X, ...]."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated or (origin in (typing.Union, types.UnionType) and len(args) == 1):
        return base_type(args[0])
    return annotation


def _add(section: argparse._ArgumentGroup, setting: Setting, command: str) -> None:
    annotation = base_type(setting.info.annotation)
    flag = setting.flag
    kwargs: dict[str, Any] = {"dest": setting.name, "default": argparse.SUPPRESS}
    origin = typing.get_origin(annotation)
    if annotation is bool:
        kwargs["action"] = argparse.BooleanOptionalAction
    elif origin is list:  # one value each, repeatable: --baseline A B would take B, an operand
        kwargs["action"] = "append"
        kwargs["metavar"] = flag.metavar or "VALUE"
    elif origin is typing.Literal:
        kwargs["choices"] = list(typing.get_args(annotation))
    elif annotation in (int, float):  # one rule for flags, variables and config files
        kwargs["metavar"] = flag.metavar or "N"
        if setting.name in READ_AT_THE_FLAG.get(command, ()) and setting.bounds is not None:
            low, high, _, _ = setting.bounds  # theirs include both ends
            kwargs["type"] = numbers.argument(low, high)
    else:
        kwargs["metavar"] = flag.metavar or ("PATH" if annotation is Path else "VALUE")
    names = [f"-{flag.short}"] if flag.short else []
    section.add_argument(*names, setting.option, help=_help(setting), **kwargs)


def add_settings_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """A flag for each setting `command` takes, in the groups of the model (the everyday ones
    first), then --config and --print-config."""
    takes = COMMANDS[command]
    for group in GROUPS:
        settings = [s for s in SETTINGS.values() if s.group is group and s.name in takes]
        if settings:
            section = parser.add_argument_group(group.heading)
            for setting in settings:
                _add(section, setting, command)
    section = parser.add_argument_group(CONFIG_HEADING)
    section.add_argument(
        "--config",
        metavar="FILE",
        help="read settings from this YAML file, one `long-flag-name: value` a line (a flag "
        "beats an environment variable, which beats the file, which beats the default) "
        f"[env: {CONFIG_VARIABLE}]",
    )
    section.add_argument(
        "--print-config",
        action="store_true",
        help="print each setting this command takes, its value and where it came from (a "
        "flag, a variable, the config file or the default), and exit",
    )


def load_from_args(args: argparse.Namespace) -> Loaded:
    """The settings of the command parsed into `args` (any command's, when it names none),
    from its flags, the environment, the config file and the defaults; errors name the flag.
    From here on, every output is scrubbed of the settings' secrets."""
    command: str | None = getattr(args, "_name", None)
    takes = COMMANDS.get(command or "", SETTINGS)
    given = {k: v for k, v in vars(args).items() if k in SETTINGS and k in takes}
    try:
        loaded = load(command, given, config=getattr(args, "config", None))
    except UsageError as exc:
        exc.with_usage = True
        raise
    scrub.configure(*credentials(loaded.settings))
    return loaded


def settings_from_args(args: argparse.Namespace) -> Settings:
    """The settings of the command parsed into `args` (load_from_args)."""
    return load_from_args(args).settings


def print_config(loaded: Loaded, command: str) -> Iterator[str]:
    """--print-config: each setting the command takes, by group, with its value and where it
    came from; secrets hidden, every value one safe line."""
    from evalgate.settings.values import value_of

    takes = COMMANDS[command]
    yield f"# evalgate {command}: each setting, its value and where it came from"
    yield "# (a flag beats a variable, which beats the config file, which beats the default)"
    for group in GROUPS:
        settings = [s for s in SETTINGS.values() if s.group is group and s.name in takes]
        if not settings:
            continue
        yield f"{group.heading}:"
        rows = []
        for setting in settings:
            value = shown(setting, value_of(loaded.settings, setting.name))
            if isinstance(value, SecretStr):
                value = "<hidden>"
            if isinstance(value, list):
                value = ", ".join(str(v) for v in value)
            text = line("{}", "unset" if value in (None, "") else str(value))
            rows.append((setting.option, text, loaded.origin(setting.name)))
        flag, said = (max(len(row[i]) for row in rows) for i in (0, 1))
        for option, text, origin in rows:
            yield f"  {option:<{flag}}  {text:<{said}}  ({origin})"


def settings_table() -> str:
    """docs/settings.md's tables, one per group, generated from the model: each setting's
    flag, variables, default, meaning and range, and the commands that take it."""

    lines: list[str] = []
    for group in GROUPS:
        lines += [f"### {group.heading}", ""]
        lines += ["| flag | environment | default | commands | meaning |"]
        lines += ["| --- | --- | --- | --- | --- |"]
        for setting in (s for s in SETTINGS.values() if s.group is group):
            default = _default(setting)
            shown_default = "" if default in (None, []) else f"`{default}`"
            text = _meaning(setting).replace("|", "\\|")
            if span := value_range(setting):
                text += f" Range: {span}."
            env = ", ".join(f"`{name}`" for name in setting.variables)
            flag = (f"`-{setting.flag.short}`, " if setting.flag.short else "") + (
                f"`{setting.option}`"
            )
            commands = ", ".join(c for c in SUBCOMMANDS if setting.name in COMMANDS[c])
            lines.append(f"| {flag} | {env} | {shown_default} | {commands} | {text} |")
        lines.append("")
    return "\n".join(lines)


# -- the one --json rule -------------------------------------------------------------------------

STDOUT = "-"
"""`--json -`: the document on stdout, and nothing else there (the rest goes to stderr)."""


def check_reports(
    reads: Sequence[str | Path | None], json_file: str | None, html: str | None = None
) -> None:
    """`--json FILE` and `--html FILE` checked before the command reads or writes anything:
    never onto a file it reads (`reads`), nor onto evidence (check_outputs)."""
    from evalgate.evidence.outputs import Output, check_outputs

    outputs = [Output("--json", json_file)] if json_file and json_file != STDOUT else []
    outputs += [Output("--html", html)] if html else []
    if outputs:
        check_outputs(outputs, [path for path in reads if path is not None])


def put_json(path: str, document: Any) -> None:
    """The command's document: printed on stdout for `--json -`, else written whole to the file
    (an ArtifactError when it cannot be)."""
    from evalgate.evidence.outputs import write_output

    if path == STDOUT:  # its exact text minus secrets, in ASCII
        print(scrub.terminal_json(document))
    else:
        write_output(path, scrub.json_text(document, indent=2) + "\n", label="--json")
