"""evalgate's JSON schemas (result, sample, thresholds, verdict, comparison) and their checks.

A valid document is answered by a compiled check: one Python function per (sub)schema, the same
keyword semantics as jsonschema's Draft 2020-12 for the keywords evalgate's schemas use, 50 times
faster. jsonschema is loaded only for a document that fails it, to say how (or for a schema with
a keyword the compiler does not know). JSON text read from disk can skip the Python check: a
msgspec type that states the schema (typed.py) accepts it in C while decoding (accepts_json).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

# -- the compiled check: jsonschema's answer for a valid document, 50 times faster ---------------

Check = Callable[[Any], bool]


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


_NOTES = {"$schema", "$id", "$defs", "$comment", "title", "description", "default", "examples"}
_KNOWN = {
    "type",
    "enum",
    "const",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "minItems",
    "minProperties",
    "required",
    "properties",
    "additionalProperties",
    "items",
    "oneOf",
    "anyOf",
    "$ref",
    *_NOTES,
}
_TESTS = {
    "string": "isinstance({v}, str)",
    "object": "isinstance({v}, dict)",
    "array": "isinstance({v}, list)",
    "null": "{v} is None",
    "boolean": "({v} is True or {v} is False)",
    "number": "(isinstance({v}, (int, float)) and not isinstance({v}, bool))",
    "integer": "((isinstance({v}, int) and not isinstance({v}, bool)) or "
    "(isinstance({v}, float) and {v}.is_integer()))",
}
_FIRST = {
    "number": "type({v}) is float or type({v}) is int",
    "integer": "type({v}) is int",
}
"""What a decoded document's value almost always is, tested first: `type(v) is int` is one
comparison where `isinstance(v, int) and not isinstance(v, bool)` is two calls."""
_FAILS = {
    "minimum": "{v} < {b}",
    "maximum": "{v} > {b}",
    "exclusiveMinimum": "{v} <= {b}",
    "exclusiveMaximum": "{v} >= {b}",
}


def _types(node: Mapping[str, Any]) -> list[str] | None:
    """The JSON types a (sub)schema allows, None when it does not say."""
    if "type" not in node:
        return None
    return [node["type"]] if isinstance(node["type"], str) else list(node["type"])


class _Compiler:
    """Writes one Python function per (sub)schema that returns False at the first violation:
    the same keyword semantics as jsonschema's Draft 2020-12, for the keywords in _KNOWN."""

    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        self.lines: list[str] = []
        self.names: dict[int, str] = {}
        self.consts: dict[str, Any] = {"_MISSING": object()}
        self.counter = 0

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def const(self, value: Any) -> str:
        name = self.fresh("_c")
        self.consts[name] = value
        return name

    def function(self, node: Any) -> str:
        """The name of the function that checks `node` (written once per node)."""
        known = self.names.get(id(node))
        if known is not None:
            return known
        name = self.names[id(node)] = self.fresh("_check")
        body = self.emit(node, "v", 1)
        self.lines += [f"def {name}(v):", *body, "    return True", ""]
        return name

    def emit(self, node: Any, v: str, depth: int) -> list[str]:
        pad = "    " * depth
        if isinstance(node, bool):
            return [] if node else [f"{pad}return False"]
        unknown = set(node) - _KNOWN
        if unknown:
            raise NotImplementedError(f"keywords {sorted(unknown)}")
        out = []
        if "$ref" in node:
            ref = node["$ref"]
            if not ref.startswith("#/$defs/"):
                raise NotImplementedError(f"$ref {ref}")
            target = self.function(self.root["$defs"][ref.removeprefix("#/$defs/")])
            out.append(f"{pad}if not {target}({v}): return False")
        out += [f"{pad}if {test}: return False" for test in self.scalar(node, v)]
        out += self.object(node, v, depth)
        if "items" in node:
            x = self.fresh("x")
            out += [
                f"{pad}if isinstance({v}, list):",
                f"{pad}    for {x} in {v}:",
                *self.emit(node["items"], x, depth + 2),
                f"{pad}        pass",
            ]
        for word, join, want in (("oneOf", " + ", " != 1"), ("anyOf", " or ", " is False")):
            if word in node:
                calls = join.join(f"bool({self.function(o)}({v}))" for o in node[word])
                out.append(f"{pad}if ({calls}){want}: return False")
        return out

    def scalar(self, node: Any, v: str) -> list[str]:
        """Tests (true when the value fails) for the keywords that need no nesting."""
        fails = []
        names = _types(node)
        if names is not None:
            tests = [_FIRST[name] for name in names if name in _FIRST]
            tests += [_TESTS[name] for name in names]
            fails.append("not (" + " or ".join(tests).format(v=v) + ")")
        if "enum" in node or "const" in node:
            fails.append(f"not ({self.enum(node.get('enum', [node.get('const')]), v)})")
        # a value the type test above let through is a number already
        numeric = names is not None and set(names) <= {"number", "integer"}
        number = "" if numeric else _TESTS["number"].format(v=v) + " and "
        fails += [
            number + test.format(v=v, b=repr(node[word]))
            for word, test in _FAILS.items()
            if word in node
        ]
        fails += [
            ("" if names == [json_type] else f"isinstance({v}, {kind}) and ")
            + f"len({v}) < {node[word]}"
            for word, kind, json_type in (
                ("minLength", "str", "string"),
                ("minItems", "list", "array"),
                ("minProperties", "dict", "object"),
            )
            if word in node
        ]
        return fails

    def enum(self, values: list[Any], v: str) -> str:
        """jsonschema's equality: 1 == 1.0, but True is not 1; no arrays or objects."""
        if any(isinstance(x, list | dict) for x in values):
            raise NotImplementedError("enum of arrays or objects")
        tests = [f"{v} is {x!r}" for x in (None, True, False) if any(y is x for y in values)]
        strings = frozenset(x for x in values if isinstance(x, str))
        numbers = frozenset(x for x in values if _number(x))
        if strings:
            tests.append(f"(isinstance({v}, str) and {v} in {self.const(strings)})")
        if numbers:
            tests.append(f"({_TESTS['number'].format(v=v)} and {v} in {self.const(numbers)})")
        return " or ".join(tests) or "False"

    def object(self, node: Any, v: str, depth: int) -> list[str]:
        pad = "    " * depth
        props = node.get("properties", {})
        extra = node.get("additionalProperties", True)
        if not ({"properties", "required"} & set(node)) and extra is True:
            return []
        # the type test above already returned on anything but a dict (compiled away)
        known_dict = _types(node) == ["object"]
        out = [f"{pad}if True:" if known_dict else f"{pad}if isinstance({v}, dict):"]
        if node.get("required"):
            out.append(
                f"{pad}    if not {self.const(frozenset(node['required']))} <= {v}.keys(): "
                "return False"
            )
        if extra is False:
            known = self.const(frozenset(props))
            out.append(f"{pad}    if not {v}.keys() <= {known}: return False")
        elif extra is not True:
            k, x = self.fresh("k"), self.fresh("x")
            out += [
                f"{pad}    for {k}, {x} in {v}.items():",
                f"{pad}        if {k} not in {self.const(frozenset(props))}:",
                *self.emit(extra, x, depth + 3),
                f"{pad}            pass",
            ]
        for key, sub in props.items():
            x = self.fresh("x")
            body = self.emit(sub, x, depth + 2)
            if body:
                out += [
                    f"{pad}    {x} = {v}.get({key!r}, _MISSING)",
                    f"{pad}    if {x} is not _MISSING:",
                    *body,
                ]
        return [*out, f"{pad}    pass"]


def compile_schema(schema: Mapping[str, Any]) -> Check:
    """A fast validity test for the subset of JSON Schema evalgate's schemas use.

    Raises NotImplementedError on any other keyword, so a caller can fall back to jsonschema.
    """
    compiler = _Compiler(schema)
    entry = compiler.function(schema)
    namespace = dict(compiler.consts)
    # The source is built from evalgate's own schema files (keys go through repr()), never input.
    code = compile("\n".join(compiler.lines), "<evalgate schema check>", "exec")
    exec(code, namespace)  # noqa: S102
    check: Check = namespace[entry]
    return check


# -- checking a document -------------------------------------------------------------------------


@cache
def load(name: str) -> Any:
    """The parsed ``<name>.schema.json``, read once."""
    text = (Path(__file__).parent / f"{name}.schema.json").read_text("utf-8")
    return json.loads(text)


@cache
def validator(name: str) -> Draft202012Validator:
    """jsonschema's validator for ``<name>.schema.json``, built once (jsonschema loads here)."""
    from jsonschema import Draft202012Validator

    return Draft202012Validator(load(name))


@cache
def _fast_check(name: str) -> Check | None:
    try:
        schema = load(name)
        return compile_schema(schema) if isinstance(schema, Mapping) else None
    except NotImplementedError:
        return None


@cache
def _typed(name: str) -> Callable[[bytes | str], Any] | None:
    from evalgate.schemas.typed import decoder

    schema = load(name)
    typed = decoder(schema) if isinstance(schema, Mapping) else None
    return None if typed is None else typed.decode


def accepts_json(name: str, data: bytes | str) -> bool:
    """Whether JSON text is, for certain, a document that matches schema `name`: decoded in C
    against the schema as a msgspec type (evalgate.schemas.typed). False means "not certain":
    the text may be invalid JSON, break the schema, or hold what the type states more strictly
    (an integer written 1.0); decode it and ask validation_errors."""
    typed = _typed(name)
    if typed is None:
        return False
    import msgspec

    try:
        typed(data)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return False
    return True


def is_valid(name: str, document: Any) -> bool:
    """Whether the document matches schema `name` (jsonschema only where the compiler cannot)."""
    check = _fast_check(name)
    return check(document) if check is not None else bool(validator(name).is_valid(document))


def _path(parts: Any) -> str:
    path = "$"
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def validation_errors(name: str, document: Any) -> list[str]:
    """Every way the document breaks schema `name`, each as '<json path>: <reason>'."""
    check = _fast_check(name)
    if check is not None and check(document):
        return []
    errors = sorted(validator(name).iter_errors(document), key=lambda e: list(e.absolute_path))
    return [f"{_path(error.absolute_path)}: {error.message}" for error in errors]
