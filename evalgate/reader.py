"""The one reader of evalgate's inputs: YAML from outside (task files, thresholds files), its size
bounded by its structure (RELIABILITY.md, "Task and thresholds files that try to do harm"); and
JSON, evidence and every other input, decoded strictly with errors that name the JSON path, so a
hostile file is malformed (ArtifactError, exit 2), never a crash.
"""

from __future__ import annotations

import json
import operator
import os
import re
import stat
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, TypeVar, cast, overload

import msgspec
import yaml
from msgspec import inspect, structs

from evalgate.errors import ArtifactError, YamlRefused

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

YAML_MAX_DEPTH = 64
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
            if self._depth > YAML_MAX_DEPTH or self._nodes > MAX_NODES:
                kind, what = (
                    ("nesting", f"is nested more than {YAML_MAX_DEPTH} levels deep")
                    if self._depth > YAML_MAX_DEPTH
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
        """An integer bounded as the JSON reader bounds one (evalgate.reader): below
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


# JSON: msgspec, then Python's json; the nesting and integer bounds: docs/architecture.md, "One
# evidence contract".

MAX_DEPTH = 100
"""Arrays and objects nested deeper than this are refused in plain JSON values: no file
evalgate reads nests more than a few levels (a model config, lm-eval's results: under 10)."""
HUGE_INT = int(sys.float_info.max)
"""Integers of plain values are below this: past it no float holds them (a typed document's
own integers are bounded by their types, to 64 bits: evidence/model.py)."""
_SHAPE = bytes(
    48 if chr(i).isdigit() and i < 128 else 58 if i in b":[,\n\r" else 32 if i in b" \t-" else 120
    for i in range(256)
)
"""bytes.translate's table to a text's shape: a digit "0", what a JSON number can follow (`:`,
`[`, `,`, a line's start) ":", white space and a minus " ", anything else "x"."""
_NUMBER_DIGITS = re.compile(rb": *(0+)")
_ESCAPED = re.compile(rb"\\(.)", re.DOTALL)
"""A JSON string's escapes, left to right: what each backslash escapes."""
T = TypeVar("T")
Pairs = Callable[[list[tuple[str, Any]]], Any]


def read_bytes(path: Path | str, limit: int | None = None) -> bytes:
    """A file's bytes: opened without blocking (a FIFO would block forever), then refused
    unless it is a regular file, and unread when it is over `limit` bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with open(fd, "rb", buffering=0) as file:  # closes fd
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise ArtifactError(f"{path} is not a regular file (a FIFO, a device or a socket).")
            data = file.readall() if limit is None else file.read(limit + 1)
    except OSError as exc:
        raise ArtifactError(f"Cannot read {path}: {exc.strerror}.") from exc
    if limit is not None and len(data) > limit:
        raise ArtifactError(
            f"{path} is {max(len(data), info.st_size):,} bytes, over the {limit:,} that a file "
            "of its kind can need."
        )
    return data


@overload
def read(path: Path | str, kind: type[T], refusal: str = "") -> T: ...
@overload
def read(path: Path | str, kind: Any = Any, refusal: str = "") -> Any: ...
def read(path: Path | str, kind: Any = Any, refusal: str = "") -> Any:
    """The JSON file at `path` decoded into `kind` (see the module's docstring); `refusal`
    says what a document that does not fit is not ("is not an evalgate hook summary")."""
    return decode(read_bytes(path), kind, str(path), refusal)


def decode(data: bytes | str, kind: Any = Any, where: str = "", refusal: str = "") -> Any:
    """JSON text decoded into `kind`; `where` names it in errors (a path, "path line 3")."""
    text = data if isinstance(data, bytes) else data.encode("utf-8", "replace")
    try:
        value = _decode(data, kind, where)
        plain = value if kind is Any else _decode(data, Any, where)
        walked = _walk(plain)
        _refuse_repeated_keys(data, text, walked.strings, where)
        if walked.big is not None:
            raise _too_big(where, len(str(abs(walked.big))))
    except msgspec.ValidationError as exc:
        if str(exc).startswith("Integer value out of range"):
            raise _too_big(where, _longest_number(text)) from exc  # thousands of digits
        name = getattr(kind, "__name__", kind)
        refusal = refusal or (
            "is not JSON evalgate can read" if kind is Any else f"is not a valid {name}"
        )
        raise ArtifactError(f"{where} {refusal}: {located(exc)}") from exc
    except RecursionError as exc:
        raise _too_deep(where) from exc
    except UnicodeEncodeError as exc:  # json reads "\ud800" alone; no text can hold it
        raise ArtifactError(
            f"{where} holds a lone surrogate escape ({exc.object[exc.start]!r}), which is no "
            "text: it is malformed."
        ) from exc
    if kind is Any and walked.depth > MAX_DEPTH:
        raise _too_deep(where)
    return value


def decode_lines(data: bytes, kind: type[T], where: str, refusal: str = "") -> list[T]:
    """JSON Lines decoded into `kind` as decode() decodes each line, blank lines skipped: all at
    once, in C, and line by line only when that fails or a line breaks a rule (to say which
    line is wrong, and why). Lines written as evalgate writes them: Written.read."""
    try:
        plain = _LINES.decode_lines(data)
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        plain = None  # said line by line below
    if plain is not None:
        walked = _walk(plain)
        if walked.big is None and _no_repeated_keys(data, walked.strings):
            try:  # typed as a typed decode of the text types it (JSON's keys are text)
                return msgspec.convert(plain, list[kind], str_keys=True)  # type: ignore[valid-type]
            except msgspec.ValidationError:
                pass  # said line by line below
    return [
        decode(line, kind, f"{where} line {number}", refusal)
        for number, line in enumerate(data.splitlines(), start=1)
        if line.strip()
    ]


Strings = int | Callable[[list[Any]], int]
"""How many strings (keys among them) the JSON text of values of one type holds: as many for
every value, or as counted from the values."""


class Written(Generic[T]):
    """Records of a struct type as evalgate writes them: every key present, no other (its
    fields all required, unknown keys refused), so the strings their text holds follow from
    the values. Their lines are then read in one typed pass, with no plain values to walk: a
    typed field's integers are bounded by its type, the nesting by the type, NaN is no JSON to
    msgspec, and as many strings written as decoded rule a repeated key out, as in decode()."""

    def __init__(self, kind: type[T]) -> None:
        self.kind = kind
        fields = [(f.name, f.type) for f in structs.fields(kind)]  # type: ignore[arg-type]
        every_key = msgspec.defstruct(
            kind.__name__,
            fields,
            bases=(kind,),
            module=kind.__module__,
            kw_only=True,
            frozen=kind.__struct_config__.frozen,  # type: ignore[attr-defined]
            forbid_unknown_fields=True,
        )
        self._decoder = msgspec.json.Decoder(every_key)
        strings = _strings(inspect.type_info(every_key))
        if strings is None:
            raise TypeError(f"{kind.__name__}'s strings cannot be counted from its values.")
        self._strings: Strings = strings

    def read(self, data: bytes) -> list[T] | None:
        """The lines decoded (instances of a subclass of the kind that requires every key),
        or None when any key is absent or they break a rule: such text is for decode_lines,
        which reads what it can and says what is wrong."""
        try:
            values = self._decoder.decode_lines(data)
        except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
            return None
        strings = self._strings
        counted = strings * len(values) if isinstance(strings, int) else strings(values)
        if not _no_repeated_keys(data, counted):
            return None
        return cast("list[T]", values)


def _strings(info: inspect.Type) -> Strings | None:
    """How to count the strings of values of a type (None: not from the values alone, as an
    open struct's unknown keys or an absent default, or a type this does not count)."""
    if isinstance(info, inspect.Metadata):
        return _strings(info.type)
    if isinstance(info, inspect.IntType | inspect.BoolType | inspect.FloatType | inspect.NoneType):
        return 0
    if isinstance(info, inspect.StrType) or (
        isinstance(info, inspect.LiteralType) and all(isinstance(v, str) for v in info.values)
    ):
        return 1
    if isinstance(info, inspect.UnionType):
        return _optional(info)
    if isinstance(info, inspect.StructType):
        return _struct(info)
    return _dict(info) if isinstance(info, inspect.DictType) else None


def _dict(info: inspect.DictType) -> Strings | None:
    """A dict's strings: its keys (text, in JSON), and what its values hold."""
    items = _strings(info.value_type)
    if items is None or not isinstance(info.key_type, inspect.StrType):
        return None
    if isinstance(items, int):
        return lambda values: (1 + items) * sum(map(len, values))
    return lambda values: sum(map(len, values)) + items([v for d in values for v in d.values()])


def _optional(info: inspect.UnionType) -> Strings | None:
    """A type or None: its strings, in the values that are not None."""
    types = [t for t in info.types if not isinstance(t, inspect.NoneType)]
    inner = _strings(types[0]) if len(types) == 1 else None
    if inner is None or inner == 0:
        return inner
    if isinstance(inner, int):
        return lambda values: inner * (len(values) - values.count(None))
    return lambda values: inner([v for v in values if v is not None])


def _struct(info: inspect.StructType) -> Strings | None:
    """A struct's strings: a key per field (every one required, no other allowed), and what
    the fields hold."""
    if not info.forbid_unknown_fields or info.array_like or info.tag_field is not None:
        return None
    if not all(f.required for f in info.fields):
        return None
    fields = [(operator.attrgetter(f.name), _strings(f.type)) for f in info.fields]
    if any(strings is None for _, strings in fields):
        return None
    fixed = len(fields) + sum(strings for _, strings in fields if isinstance(strings, int))
    counted = [(get, strings) for get, strings in fields if not isinstance(strings, int)]
    if not counted:
        return fixed
    return lambda values: (
        fixed * len(values)
        + sum(
            strings(list(map(get, values)))  # type: ignore[misc]
            for get, strings in counted
        )
    )


_LINES = msgspec.json.Decoder()


class _Walked(NamedTuple):
    """What one walk over plain JSON values found."""

    strings: int
    """Every string, the keys among them."""
    big: int | None
    """The first integer of HUGE_INT or more in magnitude, level by level, or None."""
    depth: int
    """How many arrays and objects deep the values nest."""


def _walk(value: Any) -> _Walked:
    """Plain JSON values walked once, level by level and without recursion (a deep document
    cannot make the walk itself recurse), with no more than a type check per value (verify
    reads 100,000 files; a run's samples.jsonl holds 20,000 values): what the rules need."""
    keys = strings = depth = 0
    big = None
    level = [value]
    while level:
        below: list[Any] = []
        nested = False
        for node in level:
            kind = type(node)
            if kind is str:
                strings += 1
            elif kind is dict:
                keys += len(node)
                below += node.values()
                nested = True
            elif kind is list:
                below += node
                nested = True
            elif kind is int and big is None and not -HUGE_INT < node < HUGE_INT:
                big = node
        depth += nested
        level = below
    return _Walked(strings + keys, big, depth)


def _too_big(where: str, digits: int) -> ArtifactError:
    return ArtifactError(
        f"{where} holds an integer of {digits:,} digits, past what a float holds: it is malformed."
    )


def _longest_number(text: bytes) -> int:
    """The most digits of a number in a JSON text, by its shape (where a number can stand)."""
    shape = b":" + text.translate(_SHAPE).lstrip(b" ")
    return max((len(run) for run in _NUMBER_DIGITS.findall(shape)), default=0)


def _decode(data: bytes | str, kind: Any, where: str) -> Any:
    try:
        return msgspec.json.decode(data, type=kind)
    except msgspec.ValidationError:
        raise
    except msgspec.DecodeError:  # not JSON to msgspec: Python's json says why, or reads it
        pass
    return msgspec.convert(_python(data, where), kind)


def _no_repeated_keys(text: bytes, strings: int) -> bool:
    """Whether a valid JSON text repeats no key in any object, told by counting strings. Each
    string written is two `"` and one more per `\\"` inside it (a backslash starts an escape of
    one more character, and only in a string); a repeated key's pair (its key, and any string
    in its value) is not decoded. So as many strings written as decoded rule a repeat out."""
    escaped_quotes = _ESCAPED.findall(text).count(b'"') if b"\\" in text else 0
    return text.count(b'"') - escaped_quotes == 2 * strings


def _refuse_repeated_keys(data: bytes | str, text: bytes, strings: int, where: str) -> None:
    """msgspec, like most JSON readers, keeps the last of a repeated key, others the first: a
    file repeating one is ambiguous, and refused naming the key and where it is. Counting is
    cheap (_no_repeated_keys); only when it cannot rule a repeat out is the text read again,
    key by key."""
    if _no_repeated_keys(text, strings):
        return
    repeated: dict[int, str] = {}

    def pairs(found: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(found)
        if len(obj) < len(found):
            seen: set[str] = set()
            repeated[id(obj)] = next(k for k, _ in found if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        return obj

    document = _python(data, where, pairs)
    if repeated:
        path, key = next(
            (path, repeated[id(node)]) for path, node in _paths(document) if id(node) in repeated
        )
        raise ArtifactError(
            f"{where} repeats the key {key!r} in one object ({path}): JSON readers keep only one "
            "of the two values, so the file is ambiguous. Keep one entry."
        )


def _paths(value: Any) -> Iterator[tuple[str, Any]]:
    """Every object and array with its JSON path, outermost first (without recursion)."""
    level: list[tuple[str, Any]] = [("$", value)]
    while level:
        yield from level
        level = [
            (f"{path}.{key}" if isinstance(node, dict) else f"{path}[{key}]", child)
            for path, node in level
            if isinstance(node, dict | list)
            for key, child in (node.items() if isinstance(node, dict) else enumerate(node))
            if isinstance(child, dict | list)
        ]


def located(exc: msgspec.ValidationError) -> str:
    """msgspec's 'Expected `int`, got `str` - at `$.n`' as '$.n: Expected `int`, got `str`'."""
    reason, found, where = str(exc).rpartition(" - at `")
    return f"{where.removesuffix('`')}: {reason}" if found else f"$: {exc}"


def schema_problems(validator: Validator, document: Any) -> list[str]:
    """Every way the document breaks the validator's JSON schema, as '<json path>: <reason>'."""
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    return [
        "$"
        + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in e.absolute_path)
        + f": {e.message}"
        for e in errors
    ]


def _python(data: bytes | str, where: str, pairs: Pairs | None = None) -> Any:
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        return json.loads(text, object_pairs_hook=pairs)
    except UnicodeDecodeError as exc:
        raise ArtifactError(
            f"{where} is not UTF-8 text ({exc.reason} at byte {exc.start})."
        ) from exc
    except json.JSONDecodeError as exc:
        raise ArtifactError(
            f"{where} is not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg})."
        ) from exc
    except ValueError as exc:  # an integer of over 4,300 digits (int_max_str_digits)
        raise ArtifactError(f"{where} is not JSON evalgate can read ({exc}).") from exc


def _too_deep(where: str) -> ArtifactError:
    return ArtifactError(
        f"{where} nests arrays and objects more than {MAX_DEPTH} levels deep, as no file "
        "evalgate reads does: it is malformed."
    )
