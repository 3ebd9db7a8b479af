"""YAML from outside (task files, thresholds files), read with its size bounded by its structure
(RELIABILITY.md, "Task and thresholds files that try to do harm").
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import yaml

from evalgate.errors import YamlRefused
from evalgate.evidence.read import HUGE_INT

MAX_DEPTH = 64
"""Mappings and lists inside one another; lm-eval's task files and thresholds files use four."""
MAX_NODES = 50_000
"""Values in one file (each key, scalar, list and mapping): a task file holds about a hundred,
a thresholds file for a thousand models some four thousand."""
MAX_CHARS = 4 * 1024 * 1024
"""Characters in one text; a file of more bytes is refused unread."""
_INT_CHARS = 400
"""Characters of an integer read at all: past HUGE_INT's 309 digits with room for a sign and
YAML's underscores."""
_NOT_PLAIN = ("binary", "set", "omap", "pairs")
_INT, _FLOAT, _STR = (f"tag:yaml.org,2002:{kind}" for kind in ("int", "float", "str"))
"""YAML's types beyond JSON's (bytes, sets, ordered pairs): refused as unknown tags."""


def load_yaml(
    text: str, tags: Mapping[str, type[str]] | None = None, *, numbers_as_text: bool = False
) -> Any:
    """Plain data from `text`; `tags` maps a local tag (``!function``) to the str subclass its
    scalar is read as; with `numbers_as_text`, a number that is a top-level mapping's value is
    kept as the text it is written as (a config file's: read then by evalgate's one rule for
    numbers, as a flag's). Raises YamlRefused."""
    if len(text) > MAX_CHARS:
        raise YamlRefused(
            "size", f"is {len(text):,} characters, over the {MAX_CHARS:,} this reader takes"
        )
    loader = _Loader(text)
    loader.tags = dict(tags or {})
    loader.numbers_as_text = numbers_as_text
    try:
        return loader.get_single_data()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1} column {mark.column + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise YamlRefused("syntax", f"is not valid YAML{where}: {problem}") from exc
    finally:
        loader.dispose()


def _line(node_or_event: Any) -> int:
    return int(node_or_event.start_mark.line) + 1


class _Loader(yaml.SafeLoader):
    tags: dict[str, type[str]]
    numbers_as_text = False
    _depth = 0
    _nodes = 0

    def construct_document(self, node: Any) -> Any:
        if self.numbers_as_text and isinstance(node, yaml.MappingNode):
            for _, value in node.value:
                if isinstance(value, yaml.ScalarNode) and value.tag in (_INT, _FLOAT):
                    value.tag = _STR
        return super().construct_document(node)

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise YamlRefused(
                "alias",
                f"uses the alias *{event.anchor} (line {_line(event)}): aliases are not "
                "accepted, since a few lines of them can expand to gigabytes. Write the "
                "values out",
            )
        self._depth += 1
        self._nodes += 1
        try:
            if self._depth > MAX_DEPTH or self._nodes > MAX_NODES:
                kind, what = (
                    ("nesting", f"is nested more than {MAX_DEPTH} levels deep")
                    if self._depth > MAX_DEPTH
                    else ("size", f"holds more than {MAX_NODES:,} values")
                )
                line = _line(self.peek_event())  # type: ignore[no-untyped-call]
                raise YamlRefused(
                    kind, f"{what} (line {line}): no task or thresholds file needs that"
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_undefined(self, node: Any) -> Any:
        if node.tag in self.tags and isinstance(node, yaml.ScalarNode):
            return self.tags[node.tag](self.construct_scalar(node))
        raise YamlRefused(
            "tag", f"uses the tag {node.tag} (line {_line(node)}), which evalgate does not read"
        )

    def construct_strict_mapping(self, node: yaml.MappingNode) -> Any:
        seen: set[str] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node)
            if not isinstance(key, str):
                written = key_node.value if isinstance(key_node, yaml.ScalarNode) else key
                raise YamlRefused(
                    "key",
                    f"has the key {written!r} (line {_line(key_node)}), which YAML reads as "
                    f"{type(key).__name__}, not text: quote it",
                )
            if key in seen:
                raise YamlRefused(
                    "repeated",
                    f"repeats the key {key!r} in one mapping (line {_line(key_node)}): "
                    "YAML readers keep only one of the two values, so the file is "
                    "ambiguous. Keep one entry",
                )
            seen.add(key)
        return self.construct_mapping(node)

    def construct_bounded_int(self, node: yaml.ScalarNode) -> int:
        """An integer bounded as the JSON reader bounds one (evalgate.evidence.read): below
        what a float holds, so a number of thousands of digits is refused, not a crash."""
        written = str(node.value).replace("_", "")  # YAML's 1_000: separators are no digits
        value = HUGE_INT if len(written) > _INT_CHARS else int(self.construct_yaml_int(node))
        if abs(value) >= HUGE_INT:
            digits = sum(char.isdigit() for char in written)
            raise YamlRefused(
                "integer",
                f"holds an integer of {digits:,} digits (line {_line(node)}), past what a float "
                "holds: it is malformed",
            )
        return value

    def construct_text(self, node: yaml.ScalarNode) -> str:
        """A date as the text it is written as."""
        return str(self.construct_scalar(node))


_Loader.add_constructor(None, _Loader.construct_undefined)
_Loader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _Loader.construct_strict_mapping
)
_Loader.add_constructor("tag:yaml.org,2002:timestamp", _Loader.construct_text)
_Loader.add_constructor(_INT, _Loader.construct_bounded_int)
for _kind in _NOT_PLAIN:
    _Loader.add_constructor(f"tag:yaml.org,2002:{_kind}", _Loader.construct_undefined)


def paths(node: Any, where: str) -> Iterator[tuple[str, Any]]:
    """Every value of a parsed document with its path, outermost first; each key too, with its
    value's path (a YAML key can be tagged). `where` names the root: "$" gives $.a[0], "" a[0]."""
    yield where, node
    if isinstance(node, dict):
        for key, value in node.items():
            inner = f"{where}.{key}" if where else str(key)
            yield inner, key
            yield from paths(value, inner)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from paths(value, f"{where}[{index}]")
