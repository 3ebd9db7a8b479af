"""A user's lm-eval task file (``--task FILE``), checked whole before anything is sent: lm-eval
would import its code, render its templates unsandboxed and load the metrics it names. Its two
small languages, templates and regular expressions, are held to what evalgate and lm-eval read
alike and to what cannot backtrack for hours on one answer (RELIABILITY.md, "Task and thresholds
files that try to do harm").
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from evalgate.errors import ArtifactError, UsageError, YamlRefused
from evalgate.reader import MAX_CHARS, load_yaml, paths, read_bytes
from evalgate.scrub import capped

try:
    from re import _parser  # type: ignore[attr-defined]  # the parser re compiles with
except ImportError:  # Python 3.10
    import sre_parse as _parser

FIELD = re.compile(r"\{\{\s*(\w+)\s*\}\}")
"""A plain substitution, ``{{question}}``: the only template syntax a task file may use."""
_MARKS = ("{{", "}}", "{%", "%}", "{#", "#}")
_REPEATS = {_parser.MAX_REPEAT, _parser.MIN_REPEAT, getattr(_parser, "POSSESSIVE_REPEAT", None)}


def plain_template(text: str) -> bool:
    """Whether `text` holds no Jinja but ``{{field}}`` substitutions, read alike by FIELD and
    by jinja2's parser."""
    from jinja2 import Environment, nodes
    from jinja2.exceptions import TemplateSyntaxError

    if any(mark in FIELD.sub("", text) for mark in _MARKS):
        return False
    try:
        body = Environment().parse(text).body  # noqa: S701 - parsed, never rendered
    except TemplateSyntaxError:
        return False
    parts = [part for node in body for part in getattr(node, "nodes", [node])]
    names = [part.name for part in parts if isinstance(part, nodes.Name)]
    plain = all(isinstance(part, nodes.TemplateData | nodes.Name) for part in parts)
    return plain and names == FIELD.findall(text)


def pattern_problem(pattern: str) -> str:
    """What is wrong with `pattern` as a task file's regex, or "" when nothing is."""
    try:
        re.compile(pattern)  # also what only compiling finds (a look-behind of varying width)
        parsed = _parser.parse(pattern)
    except re.error as exc:
        return f"is not a regular expression ({exc})"
    if _nested(parsed, inside=False):
        return (
            "repeats a part that itself repeats or branches, which can backtrack for hours on "
            "one answer: write it with one level of repetition and no alternatives inside it"
        )
    return ""


def _nested(pattern: Any, *, inside: bool) -> bool:
    """Whether a repeat of more than once, or a branch, lies inside such a repeat in sre's
    parse tree."""
    for op, arg in pattern:
        many = op in _REPEATS and arg[1] > 1
        if inside and (many or op is _parser.BRANCH):
            return True
        if any(_nested(sub, inside=inside or many) for sub in _parts(arg)):
            return True
    return False


def _parts(arg: Any) -> Iterator[Any]:
    """The subpatterns in one node's argument (a group's body, a branch's alternatives...)."""
    if isinstance(arg, _parser.SubPattern):
        yield arg
    elif isinstance(arg, tuple | list):
        for item in arg:
            yield from _parts(item)


# The file, checked whole.

EXACT_MATCH_OPTIONS = (
    "metric", "aggregation", "higher_is_better", "ignore_case", "ignore_punctuation",
    "ignore_numbers", "regexes_to_ignore",
)  # fmt: skip
SAMPLING = (
    "temperature", "top_p", "top_k", "min_p", "seed", "presence_penalty", "frequency_penalty",
    "repetition_penalty",
)  # fmt: skip
"""generation_kwargs sent in each request body as they are (besides `until` and `do_sample`)."""


class _Function(str):
    """The text of a ``!function`` tag: Python code the task file would have lm-eval import."""

    __slots__ = ()


def load_task_file(path: Path) -> tuple[dict[str, Any], bytes]:
    """The task file's settings, checked (the data files not yet read), and the bytes they
    were read from."""
    if not path.is_file():
        raise UsageError(
            f"--task {str(path)!r} is neither a task evalgate knows (gsm8k, "
            "gpqa_diamond_cot_n_shot) nor a task file. Name one of those, or the path of an "
            "lm-eval task YAML."
        )
    try:
        raw = read_bytes(path, MAX_CHARS)
        config = load_yaml(raw.decode("utf-8"), tags={"!function": _Function})
    except ArtifactError as exc:  # not a regular file, or over the size YAML is read at
        raise UsageError(f"{exc.message} Fix the task file.") from exc
    except (YamlRefused, UnicodeDecodeError) as exc:
        message = exc.message if isinstance(exc, YamlRefused) else "is not UTF-8 text"
        raise UsageError(f"{path} {message}. Fix the task file.") from exc
    if not isinstance(config, dict):
        raise UsageError(f"{path} is not an lm-eval task file (no mapping of task settings).")
    output_type = config.get("output_type", "generate_until")
    if output_type != "generate_until":
        task = capped(repr(config.get("task")), 200)
        raise UsageError(
            f"{path} is a {output_type} task (task {task}): it scores the log-likelihood of "
            "each choice, which the engines' chat and completions APIs cannot report, so "
            "evalgate cannot run it. Use a generate_until version of the task (one that asks "
            "the model to write its answer)."
        )
    code = [where for where, value in paths(config, "") if isinstance(value, _Function)]
    if code:
        raise UsageError(
            f"{path} runs Python code ({', '.join(code)}), which evalgate does not import "
            "(a !function tag): use a task whose prompts are templates and whose data are "
            "local JSONL files."
        )
    unknown = [str(key) for key in config if key not in KEYS]
    if unknown:
        raise UsageError(
            f"{path} has keys evalgate does not run ({', '.join(unknown)}): the keys evalgate "
            f"knows are {', '.join(KEYS)}. Remove the others (a task that needs them cannot "
            "be run by evalgate)."
        )
    for key, value in config.items():
        config[key] = KEYS[key](_Where(path, key), value)
    return config, raw


class _Where(NamedTuple):
    """A key's place in the file, for messages that name it."""

    path: Path
    key: str

    def refuse(self, why: str, value: Any) -> UsageError:
        return UsageError(
            f"{self.path}: {self.key} {why} (it is {capped(repr(value), 200)}). Fix the task file."
        )

    def inner(self, key: str | int) -> _Where:
        return self._replace(
            key=f"{self.key}[{key}]" if isinstance(key, int) else f"{self.key}.{key}"
        )


def _text(where: _Where, value: Any) -> str:
    if not isinstance(value, str):
        raise where.refuse("must be text", value)
    return value


def _count(where: _Where, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise where.refuse("must be a whole number, 0 or more", value)
    return value


def _template(where: _Where, value: Any) -> str:
    """A field lm-eval renders with jinja2: plain ``{{field}}`` substitutions (plain_template)."""
    text = _text(where, value)
    if where.key.endswith(("doc_to_text", "doc_to_target")) and "{{" not in text:
        text = "{{" + text + "}}"  # lm-eval reads a bare name as that field of the doc
    if not plain_template(text):
        raise where.refuse(
            "uses Jinja beyond {{field}} substitutions, which evalgate does not render: use "
            "plain {{field}} templates",
            value,
        )
    return text


def _mapping(where: _Where, value: Any, known: dict[str, Checker]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise where.refuse("must be a mapping", value)
    unknown = [str(key) for key in value if key not in known]
    if unknown:
        raise where.inner(unknown[0]).refuse(
            f"is not a key evalgate knows here ({', '.join(known)})", value[unknown[0]]
        )
    return {key: known[key](where.inner(key), item) for key, item in value.items()}


def _items(where: _Where, value: Any, check: Checker) -> list[Any]:
    if not isinstance(value, list):
        raise where.refuse("must be a list", value)
    return [check(where.inner(index), item) for index, item in enumerate(value)]


def _one_of(*allowed: Any) -> Checker:
    def check(where: _Where, value: Any) -> Any:
        if value not in allowed or isinstance(value, bool) != isinstance(allowed[0], bool):
            raise where.refuse(f"must be {' or '.join(map(repr, allowed))}", value)
        return value

    return check


def _number(where: _Where, value: Any) -> float | int:
    """A finite number (JSON has no other: a request body holding NaN is refused upstream)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise where.refuse("must be a finite number", value)
    return value


def _generation(where: _Where, value: Any) -> dict[str, Any]:
    known: dict[str, Checker] = {
        "until": lambda w, v: _text(w, v) if isinstance(v, str) else _items(w, v, _text),
        "do_sample": _one_of(False, True),
    } | dict.fromkeys(SAMPLING, _number)
    return _mapping(where, value, known)


def _step(where: _Where, value: Any) -> dict[str, Any]:
    """One filter step: a built-in text filter's name and its options, each checked."""
    name = value.get("function") if isinstance(value, dict) else value
    if not isinstance(value, dict) or not isinstance(name, str) or name not in FILTERS:
        raise where.refuse(
            f"must name one of lm-eval's text filters ({', '.join(sorted(FILTERS))})", name
        )
    for option in REQUIRED.get(name, ()):
        if option not in value:
            raise UsageError(f"{where.path}: {where.key} has no {option}, which {name} needs.")
    return _mapping(where, value, {"function": _text, **FILTERS[name]})


def _regex(where: _Where, value: Any) -> str:
    """A regular expression lm-eval applies to each answer (pattern_problem)."""
    text = _text(where, value)
    problem = pattern_problem(text)
    if problem:
        raise where.refuse(problem, value)
    return text


def _texts(where: _Where, value: Any) -> dict[str, str]:
    return _mapping(where, value, dict.fromkeys(value, _text) if isinstance(value, dict) else {})


def _filter(where: _Where, value: Any) -> dict[str, Any]:
    return _mapping(where, value, {"name": _text, "filter": lambda w, v: _items(w, v, _step)})


def _metric(where: _Where, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict) or value.get("metric") != "exact_match":
        name = value.get("metric") if isinstance(value, dict) else value
        raise where.refuse("must be exact_match, the metric evalgate gates on", name)
    known: dict[str, Checker] = dict.fromkeys(EXACT_MATCH_OPTIONS, _one_of(False, True))
    known.update(metric=_text, aggregation=_one_of("mean"), regexes_to_ignore=_regexes)
    return _mapping(where, value, known)


def _regexes(where: _Where, value: Any) -> list[str]:
    return _items(where, value, _regex)


def _splits(where: _Where, value: Any) -> dict[str, str]:
    """data_files: a file name for each split, any split names."""
    if not isinstance(value, dict):
        raise where.refuse("must map each split to its file", value)
    return {
        _text(where, split): _text(where.inner(str(split)), file) for split, file in value.items()
    }


Checker = Callable[[_Where, Any], Any]

_MATCH: dict[str, Checker] = {
    "regex_pattern": _regex, "group_select": _one_of(0, -1), "fallback": _text}  # fmt: skip
FILTERS: dict[str, dict[str, Checker]] = {
    "regex": _MATCH,
    "regex_pos": _MATCH,
    "multi_choice_regex": _MATCH | {
        "ignore_case": _one_of(False, True), "ignore_punctuation": _one_of(False, True),
        "regexes_to_ignore": _regexes},
    "take_first": {}, "majority_vote": {}, "remove_whitespace": {}, "lowercase": {},
    "uppercase": {}, "format_span": {},
    "take_first_k": {"k": _one_of(1)},
    "map": {"mapping_dict": _texts, "default_value": _text},
}  # fmt: skip
"""lm-eval's built-in filters that only transform text (not `custom`, which calls code), with
their options: group_select takes the first or the last match (another index fails on an answer
with fewer matches), take_first_k the one answer a question gets (repeats is 1), and REQUIRED
those a filter fails without (map's default: the text of an answer it does not map)."""
REQUIRED = {"take_first_k": ("k",), "map": ("default_value",)}

KEYS: dict[str, Checker] = {
    "task": _text,
    "task_alias": _text,
    "tag": lambda w, v: _items(w, v, _text) if isinstance(v, list) else _text(w, v),
    "dataset_path": _text,
    "dataset_kwargs": lambda w, v: _mapping(w, v, {"data_files": _splits}),
    "training_split": _text,
    "validation_split": _text,
    "test_split": _text,
    "fewshot_split": _text,
    "output_type": _text,
    "doc_to_text": _template,
    "doc_to_target": _template,
    "description": _template,
    "target_delimiter": _text,
    "fewshot_delimiter": _text,
    "fewshot_config": lambda w, v: _mapping(w, v, {"sampler": _one_of("default")}),
    "num_fewshot": _count,
    "generation_kwargs": _generation,
    "filter_list": lambda where, value: _items(where, value, _filter),
    "metric_list": lambda where, value: _items(where, value, _metric),
    "repeats": _one_of(1),  # evalgate asks each question once; a task asks again in its data
    "metadata": lambda where, value: value,  # plain data lm-eval only stores
}
"""Every key a task file may hold, with the check of its value."""
