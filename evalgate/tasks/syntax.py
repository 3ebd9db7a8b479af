"""The two small languages of a task file, its templates and its regular expressions, held to
what evalgate and lm-eval read alike and to what cannot backtrack for hours on one answer
(RELIABILITY.md, "Task and thresholds files that try to do harm").
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

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
