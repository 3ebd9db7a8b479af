"""The one reader of JSON: evalgate's evidence and every JSON input it is given.

``read(path, Type)`` decodes a file strictly into a type of the evidence contract
(evidence/model.py), or into plain JSON values (``Any``): msgspec first, in C; text msgspec
refuses as JSON goes to Python's json module, which accepts what it accepts (NaN, Infinity) and
says at which line and column the text breaks. A document that does not fit its type is
refused naming the JSON path of what is wrong, first: ``$.scores[0].n: Expected `int`, got
`str```. Every failure is an ArtifactError (a usage error, exit 2), never an internal one.

Nesting is bounded: msgspec and json both stop a document nested deeper than the interpreter's
recursion limit (some 1,000 levels less the caller's stack) with RecursionError, and plain
values are held to MAX_DEPTH levels, so nothing that walks them later (a schema check, a
message that shows a value) recurses near that limit. Either way the file is malformed.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, overload

import msgspec

from evalgate.errors import ArtifactError

MAX_DEPTH = 100
"""Arrays and objects nested deeper than this are refused in plain JSON values: no file
evalgate reads nests more than a few levels (a model config, lm-eval's results: under 10)."""
T = TypeVar("T")
Pairs = Callable[[list[tuple[str, Any]]], Any]


def read_bytes(path: Path | str) -> bytes:
    """A file's bytes: opened without blocking (a FIFO would block forever), then refused
    unless it is a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise ArtifactError(f"{path} is not a regular file (a FIFO, a device or a socket).")
            data = os.read(fd, info.st_size + 1)
            while len(data) > info.st_size:  # it grew since the fstat: read to its end
                more = os.read(fd, 1 << 20)
                if not more:
                    break
                data += more
            return data
        finally:
            os.close(fd)
    except OSError as exc:
        raise ArtifactError(f"Cannot read {path}: {exc.strerror}.") from exc


@overload
def read(path: Path | str, kind: type[T], refusal: str = "") -> T: ...
@overload
def read(path: Path | str, kind: Any = Any, refusal: str = "") -> Any: ...
def read(path: Path | str, kind: Any = Any, refusal: str = "") -> Any:
    """The JSON file at `path` decoded into `kind` (see the module's docstring); `refusal`
    says what a document that does not fit is not ("is not an evalgate hook summary")."""
    return decode(read_bytes(path), kind, str(path), refusal)


def decode(
    data: bytes | str,
    kind: Any = Any,
    where: str = "",
    refusal: str = "",
    pairs: Pairs | None = None,
) -> Any:
    """JSON text decoded into `kind`; `where` names it in errors (a path, "path line 3").
    `pairs`, json's object_pairs_hook, is for a reader that must see every key of an object
    (a repeated one): the text then goes to Python's json module alone."""
    try:
        value = _decode(data, kind, where, pairs)
    except msgspec.ValidationError as exc:
        refusal = refusal or f"is not a valid {getattr(kind, '__name__', kind)}"
        raise ArtifactError(f"{where} {refusal}: {located(exc)}") from exc
    except RecursionError as exc:
        raise _too_deep(where) from exc
    except UnicodeEncodeError as exc:  # json reads "\ud800" alone; no text can hold it
        raise ArtifactError(
            f"{where} holds a lone surrogate escape ({exc.object[exc.start]!r}), which is no "
            "text: it is malformed."
        ) from exc
    if kind is Any and _nested_deeper(value, MAX_DEPTH):
        raise _too_deep(where)
    return value


def _decode(data: bytes | str, kind: Any, where: str, pairs: Pairs | None) -> Any:
    if pairs is None:
        try:
            return msgspec.json.decode(data, type=kind)
        except msgspec.ValidationError:
            raise
        except msgspec.DecodeError:  # not JSON to msgspec: Python's json says why, or reads it
            pass
    return msgspec.convert(_python(data, where, pairs), kind)


def located(exc: msgspec.ValidationError) -> str:
    """msgspec's 'Expected `int`, got `str` - at `$.n`' as '$.n: Expected `int`, got `str`'."""
    reason, found, where = str(exc).rpartition(" - at `")
    return f"{where.removesuffix('`')}: {reason}" if found else f"$: {exc}"


def _python(data: bytes | str, where: str, pairs: Pairs | None) -> Any:
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


def _too_deep(where: str) -> ArtifactError:
    return ArtifactError(
        f"{where} nests arrays and objects more than {MAX_DEPTH} levels deep, as no file "
        "evalgate reads does: it is malformed."
    )


def _nested_deeper(value: Any, limit: int) -> bool:
    """Whether plain JSON values nest more than `limit` arrays and objects (walked level by
    level: a deep document cannot make the walk itself recurse)."""
    level = [value] if isinstance(value, dict | list) else []
    for _ in range(limit):
        level = [
            child
            for node in level
            for child in (node.values() if isinstance(node, dict) else node)
            if isinstance(child, dict | list)
        ]
        if not level:
            return False
    return True
