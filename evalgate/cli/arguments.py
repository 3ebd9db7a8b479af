"""The habits a command line brings from lm-eval and vLLM, and the advice for each mistake.

A flag the command does not take is named before argparse reads the line (argparse would read
its value as an operand, and say something else first): lm-eval's and vLLM's spellings get
evalgate's flag, an underscore or a capital gets the flag as evalgate spells it, a flag of
another command says whose it is, anything else the nearest flag of the command. argparse's
own errors get the advice that fits them (a bare --json, a second value after --baseline).
Every message is one line, printed under the command's short usage, exit 2.
"""

from __future__ import annotations

import argparse
import difflib
import re
import shlex
import types
import typing
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import SecretStr

from evalgate import numbers, scrub
from evalgate.errors import UsageError
from evalgate.settings.sources import CONFIG_VARIABLE, Loaded, load, shown, value_range
from evalgate.settings.values import COMMANDS, GROUPS, SETTINGS, Setting, Settings, credentials
from evalgate.templates import line

SUBCOMMANDS = ("run", "context", "probe", "hook", "verify", "compare", "history")
"""The commands, in the order --help lists them."""

if TYPE_CHECKING:
    from evalgate.evidence.outputs import Output

HABITS: dict[str, tuple[str, str]] = {
    "tasks": (
        "--task",
        "is lm-eval's flag: evalgate's is --task, one task a run (gsm8k, "
        "gpqa_diamond_cot_n_shot or a task file's path)",
    ),
    "output-path": (
        "--output-dir",
        "is lm-eval's flag: evalgate's is --output-dir, the folder it writes result.json and "
        "samples.jsonl into",
    ),
    "num-concurrent": (
        "--num-concurrent",
        "is lm-eval's spelling (a --model_args key): evalgate's flag is --num-concurrent",
    ),
    "include-path": (
        "--task",
        "is lm-eval's flag: evalgate takes the task file itself, --task path/to/task.yaml",
    ),
    "log-samples": (
        "--output-dir",
        "is lm-eval's flag: evalgate always writes every answer to samples.jsonl in "
        "--output-dir; drop the flag",
    ),
    "apply-chat-template": (
        "--api",
        "is lm-eval's flag: evalgate's --api chat (the default) sends chat turns, which the "
        "engine renders with its chat template; drop the flag",
    ),
    "gen-kwargs": (
        "--max-tokens",
        "is lm-eval's flag: evalgate's output budget is --max-tokens (derived and probed when "
        "not given); the other sampling settings are the task's (a task file's "
        "generation_kwargs)",
    ),
    "max-model-len": (
        "--served-max-model-len",
        "is vLLM's flag: evalgate has two, --served-max-model-len (the --max-model-len the "
        "engine serves, when /v1/models cannot tell) and --eval-max-model-len (the context "
        "the eval asks for; derived from ISL and OSL when not given)",
    ),
    "version": ("--verbose", "goes before the command: evalgate --version"),
}
"""Another tool's flag (as `normalised` spells it): the evalgate flag the advice names (it is
given when the command takes that flag), and the advice after the flag."""

MODEL_ARGS = {
    "base_url": "--base-url",
    "model": "--model",
    "pretrained": "--model",
    "num_concurrent": "--num-concurrent",
    "max_retries": "--max-attempts",
    "timeout": "--timeout",
    "max_length": "--eval-max-model-len",
    "max_gen_toks": "--max-tokens",
}
"""lm-eval's --model_args keys (local-chat-completions) and evalgate's flag for each; the
others (tokenized_requests, eos_string, tokenizer_backend, ...) evalgate sets itself."""

_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
"""argparse's own test for a word that starts with a dash but is a number."""


def normalised(flag: str) -> str:
    """A flag without its dashes and value, in lower case, `-` for `_`: as HABITS keys it."""
    return flag.partition("=")[0].lstrip("-").lower().replace("_", "-")


def unknown_flag(command: str, options: Mapping[str, bool], words: Sequence[str]) -> str | None:
    """The advice for the first of `words` (what follows `evalgate COMMAND`) that argparse
    would read as a flag and that is none of `options` (the command's flags, each with whether
    it takes a value); None when there is none. A word right after a flag that takes a value is
    left to argparse, which says that flag lacks its value."""
    for index, word in enumerate(words):
        if word == "--":
            return None
        if not _flag_like(word) or _option(word, options) is not None:
            continue
        if index and options.get(_option(words[index - 1], options) or "", False):
            continue
        name, equals, attached = word.partition("=")
        following = words[index + 1] if index + 1 < len(words) else None
        return advice(command, options, name, attached if equals else following)
    return None


def _flag_like(word: str) -> bool:
    """A word argparse reads as a flag: a dash first, not a lone dash nor a negative number,
    no space."""
    return (
        word.startswith("-")
        and word != "-"
        and not _NEGATIVE_NUMBER.match(word)
        and " " not in word
    )


def _option(word: str, options: Mapping[str, bool]) -> str | None:
    """The flag of `options` a word names as argparse reads it: whole, with `=VALUE`, the start
    of a long flag (the first it starts: argparse itself says when it starts several), or short
    flags together (-qv); None for none."""
    name = word.partition("=")[0]
    if name in options:
        return name
    if name.startswith("--"):
        return next((option for option in options if option.startswith(name)), None)
    return word[:2] if word[:2] in options else None


def advice(command: str, options: Mapping[str, bool], flag: str, value: str | None) -> str:
    """What to say of `flag`, which `evalgate COMMAND` does not take (`value`: the word after
    it, or its =VALUE)."""
    key = normalised(flag)
    if key == "model-args" and "--base-url" in options:
        return f"{flag} is lm-eval's flag: {model_args(value)}"
    if key in HABITS and HABITS[key][0] in options:
        return f"{flag} {HABITS[key][1]}."
    spelled = "--" + key
    if spelled in options:
        how = " (evalgate's flags are spelled with hyphens)" if "_" in flag else ""
        return f"{flag} is not a flag of evalgate {command}: did you mean {spelled}?{how}"
    if elsewhere := _commands_taking(spelled):
        named = ", ".join(elsewhere[:-1]) + " and " if len(elsewhere) > 1 else ""
        return (
            f"{spelled} is a flag of evalgate {named}{elsewhere[-1]}, not of evalgate "
            f"{command} (evalgate {command} --help lists its flags)."
        )
    longs = [option.removeprefix("--") for option in options if option.startswith("--")]
    if nearest := difflib.get_close_matches(key, longs, n=1):
        return f"{flag} is not a flag of evalgate {command}: did you mean --{nearest[0]}?"
    return f"{flag} is not a flag of evalgate {command} (evalgate {command} --help lists them)."


def _commands_taking(flag: str) -> list[str]:
    """The commands that take `flag` (--limit: run, context, probe, hook)."""
    from evalgate.settings.values import COMMANDS, SETTINGS

    return [
        name
        for name in SUBCOMMANDS
        if any(SETTINGS[setting].option == flag for setting in COMMANDS[name])
    ]


def model_args(value: str | None) -> str:
    """lm-eval's `--model_args base_url=...,model=...,num_concurrent=8` as evalgate's flags,
    each with its value (a URL without its user and password, its path cut to /v1)."""
    flags: list[str] = []
    own: list[str] = []
    for part in (value or "").split(","):
        key, equals, given = (text.strip() for text in part.partition("="))
        flag = MODEL_ARGS.get(key)
        if not equals:
            continue
        if flag is None:
            own.append(key)
        else:
            flags.append(f"{flag} {shlex.quote(_v1(given) if flag == '--base-url' else given)}")
    if not flags:
        listed = ", ".join(f"{key}: {flag}" for key, flag in MODEL_ARGS.items())
        return f"evalgate takes each of its keys as a flag of its own ({listed})."
    told = f"evalgate takes each key as a flag of its own: {' '.join(flags)}"
    if own:
        told += f" ({', '.join(own)}: evalgate sets {'it' if len(own) == 1 else 'them'} itself)"
    return told + "."


def _v1(url: str) -> str:
    """lm-eval's base_url (the whole http://HOST:PORT/v1/chat/completions) as evalgate's
    --base-url (http://HOST:PORT/v1), without a user or password."""
    parts = urlsplit(url)
    path = re.sub(r"/(chat/)?completions/?$", "", parts.path)
    host = parts.netloc.rpartition("@")[2]  # keeps an IPv6 host's brackets and the port
    return urlunsplit((parts.scheme, host, path, "", ""))


def explained(message: str, words: Sequence[str]) -> str:
    """argparse's error `message` about `words` (what follows `evalgate COMMAND`), with the
    advice that fits it."""
    if message == "argument --json: expected one argument":
        return (
            f"{message}: --json takes where the document goes: use --json - to print it on "
            "stdout, or --json FILE to write it."
        )
    if message.startswith("the following arguments are required") and "--json" in words:
        took = words[words.index("--json") + 1 :][:1]
        if took and took[0] != "-":
            return (
                f"{message} (--json takes a value: it took {took[0]!r} as the file to write; "
                "to print the document on stdout, use --json -)"
            )
    if message.startswith("unrecognized arguments: "):
        first = message.removeprefix("unrecognized arguments: ").split(" ", 1)[0]
        at = words.index(first) if first in words else -1
        if at >= 2 and words[at - 2] == "--baseline":
            return (
                f"{message}: --baseline takes one value each; for two, write --baseline "
                f"{words[at - 1]} --baseline {first}, and give the results together."
            )
    return message


# Command-line flags generated from the Settings model, so the two never drift: one flag per
# setting a command takes (settings.values.COMMANDS), in argparse groups as the model groups
# them; only the flags typed reach the settings, so a flag beats the environment, which beats
# the config file, which beats the default (docs/settings.md). Also the table of docs/settings.md,
# --print-config's listing, and the one --json rule (FILE, or - for stdout) every command keeps.

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
            kwargs["type"] = numbers.argument(numbers.whole, low, high)
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


def json_outputs(path: str | None) -> list[Output]:
    """`--json FILE` as an output each command checks before it writes anything (check_outputs);
    none for `--json -` or no --json."""
    from evalgate.evidence.outputs import Output

    return [Output("--json", path)] if path and path != STDOUT else []


def put_json(path: str, document: Any) -> None:
    """The command's document: printed on stdout for `--json -`, else written whole to the file
    (an ArtifactError when it cannot be)."""
    from evalgate.evidence.outputs import write_output

    if path == STDOUT:
        print_json(document)
    else:
        write_output(path, scrub.json_text(document, indent=2) + "\n", label="--json")


def print_json(document: object) -> None:
    """A JSON document on stdout (`--json`): its exact text minus secrets, in ASCII
    (evalgate.scrub)."""
    print(scrub.terminal_json(document))
