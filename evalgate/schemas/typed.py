"""A schema as a msgspec type: JSON text decoded against it is checked in C, in one pass.

The type is never looser than the schema: a document it accepts, the schema accepts. Where
msgspec cannot say exactly what the schema says it says more (an integer written 1.0, a number
beyond 64 bits, a NaN are refused), so a refusal means only "ask the full check", never
"invalid". A schema with a shape msgspec cannot hold at all gets no type (None), and every
document goes to the full check.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, Union

import msgspec

_NOTES = {"$schema", "$id", "$defs", "$comment", "title", "description", "default", "examples"}
_BOUNDS = {"minimum": "ge", "maximum": "le", "exclusiveMinimum": "gt", "exclusiveMaximum": "lt"}
_PLAIN: dict[str, Any] = {
    "null": None,
    "boolean": bool,
    "string": str,
    "integer": int,
    "number": int | float,  # a JSON integer stays an int
    "array": list,
}
_LENGTHS = {"string": "minLength", "array": "minItems"}
_NO_VALUE = object()
"""A JSON type the node names but no value of which can match (an enum that lists none)."""


class _Unsupported(Exception):
    """A schema shape msgspec cannot state at least as strictly."""


def _json_types(node: Mapping[str, Any]) -> list[str]:
    if "type" not in node:
        raise _Unsupported("a constrained schema without a type")
    kind = node["type"]
    return [kind] if isinstance(kind, str) else list(kind)


def _kind(value: Any) -> str:
    """The JSON type of an enum's value (booleans and fractions are not stated here)."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return "string"
    if type(value) is int:
        return "integer"
    raise _Unsupported(f"an enum value {value!r}")


class _Builder:
    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        self.done: dict[int, Any] = {}
        self.count = 0

    def build(self, node: Any) -> Any:
        if node is True:
            return Any
        if not isinstance(node, Mapping):
            raise _Unsupported(f"schema {node!r}")
        known = self.done.get(id(node))
        if known is None:
            known = self.done[id(node)] = self._build(node)
        return known

    def _build(self, node: Mapping[str, Any]) -> Any:
        words = set(node) - _NOTES
        if not words:
            return Any
        if "$ref" in node:
            ref = node["$ref"]
            if words != {"$ref"} or not ref.startswith("#/$defs/"):
                raise _Unsupported(f"$ref {ref} beside other keywords")
            return self.build(self.root["$defs"][ref.removeprefix("#/$defs/")])
        for word in ("oneOf", "anyOf"):
            if word in node:
                return self._choice(node, word, words)
        kinds = _json_types(node) if "type" in node or not ({"enum", "const"} & words) else None
        if kinds is None:  # an enum alone: its values say their types
            values = node["enum"] if "enum" in node else [node["const"]]
            kinds = sorted({_kind(v) for v in values})
        members = [self._member(node, kind) for kind in kinds]
        members = [m for m in members if m is not _NO_VALUE]
        if not members:
            raise _Unsupported("no value can match")
        return Union[tuple(members)] if len(members) > 1 else members[0]  # noqa: UP007

    def _choice(self, node: Mapping[str, Any], word: str, words: set[str]) -> Any:
        """oneOf/anyOf whose options take disjoint JSON types: then one matches at most."""
        if words != {word}:
            raise _Unsupported(f"{word} beside other keywords")
        options = node[word]
        seen: set[str] = set()
        for option in options:
            kinds = set(_json_types(option))
            if "integer" in kinds or "number" in kinds:
                kinds |= {"integer", "number"}
            if kinds & seen:
                raise _Unsupported(f"{word} options that overlap")
            seen |= kinds
        return Union[tuple(self.build(o) for o in options)]  # noqa: UP007

    def _member(self, node: Mapping[str, Any], kind: str) -> Any:
        """The msgspec type for the values of one JSON type the node allows (_NO_VALUE: none)."""
        if "enum" in node or "const" in node:
            if set(node) - _NOTES - {"type", "enum", "const"}:
                raise _Unsupported("an enum beside other constraints")
            return self._enum(node["enum"] if "enum" in node else [node["const"]], kind)
        if kind == "object":
            return self._object(node)
        if kind not in _PLAIN:
            raise _Unsupported(f"type {kind}")
        items = self.build(node.get("items", True)) if kind == "array" else None
        base = list[items] if kind == "array" else _PLAIN[kind]  # type: ignore[valid-type]
        if kind in ("integer", "number"):
            meta = {_BOUNDS[w]: node[w] for w in _BOUNDS if w in node}
        else:
            length = _LENGTHS.get(kind, "")
            meta = {"min_length": node[length]} if length in node else {}
        if not meta:
            return base
        if kind == "number":  # the Meta goes on each member of int | float
            bound = msgspec.Meta(**meta)
            return Annotated[int, bound] | Annotated[float, bound]
        return Annotated[base, msgspec.Meta(**meta)]

    def _enum(self, values: list[Any], kind: str) -> Any:
        if kind == "null":
            return None if None in values else _NO_VALUE
        if kind in ("string", "integer"):
            want = str if kind == "string" else int
            chosen = tuple(v for v in values if type(v) is want)
            return Literal[chosen] if chosen else _NO_VALUE
        raise _Unsupported(f"an enum of {kind} values")

    def _object(self, node: Mapping[str, Any]) -> Any:
        props: Mapping[str, Any] = node.get("properties", {})
        extra = node.get("additionalProperties", True)
        required = list(node.get("required", []))
        if not props and not required:
            if extra is False:
                raise _Unsupported("an object that allows no key")
            mapping: Any = dict[str, self.build(extra)]  # type: ignore[misc]
            if "minProperties" in node:
                return Annotated[mapping, msgspec.Meta(min_length=node["minProperties"])]
            return mapping
        if extra not in (True, False) or "minProperties" in node:
            raise _Unsupported("properties beside a schema for the other keys")
        keys = list(props) + [k for k in required if k not in props]
        self.count += 1
        fields = [
            (f"f{i}", self.build(props.get(key, True)))
            if key in required
            else (f"f{i}", self.build(props[key]), msgspec.UNSET)
            for i, key in enumerate(keys)
        ]
        return msgspec.defstruct(
            f"Checked{self.count}",
            fields,
            kw_only=True,
            forbid_unknown_fields=extra is False,
            rename={f"f{i}": key for i, key in enumerate(keys)},
        )


def decoder(schema: Mapping[str, Any]) -> msgspec.json.Decoder[Any] | None:
    """A decoder that accepts only JSON text the schema accepts; None for a schema it cannot
    state (then every document needs the full check)."""
    try:
        return msgspec.json.Decoder(_Builder(schema).build(schema))
    except (_Unsupported, TypeError):
        return None
