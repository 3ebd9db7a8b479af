"""The habits a command line brings from lm-eval and vLLM, and the advice for each mistake.

A flag the command does not take is named before argparse reads the line (argparse would read
its value as an operand, and say something else first): lm-eval's and vLLM's spellings get
evalgate's flag, an underscore or a capital gets the flag as evalgate spells it, a flag of
another command says whose it is, anything else the nearest flag of the command. argparse's
own errors get the advice that fits them (a bare --json, a second value after --baseline).
Every message is one line, printed under the command's short usage, exit 2.
"""

from __future__ import annotations

import difflib
import re
import shlex
from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit, urlunsplit

SUBCOMMANDS = ("run", "context", "probe", "hook", "verify", "compare", "history")
"""The commands, in the order --help lists them."""

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
    from evalgate.settings.values import COMMANDS, SETTINGS  # pydantic: only for this advice

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
