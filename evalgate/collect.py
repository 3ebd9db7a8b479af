"""Finding a sweep's eval results on disk and reading each into one shape (the I/O edge of verify).

Two kinds of artifact are found under each path given:

- evalgate's ``result.json`` (checked against result.schema.json);
- the benchmark harness's plain lm-eval output: ``results*.json`` holding ``lm_eval_version``,
  with the run's ``meta_env.json`` in the same folder or the one above it (lm-eval nests its
  output under the model's name). A harness batch (``eval_concs`` in meta_env.json) names each
  file ``..._conc<N>.json``; concurrencies listed in ``failed_eval_concs``, or listed but
  without a file, come back as errored runs, and so does a meta_env.json with no results at all
  (the eval failed, was skipped, or was never staged).

Nothing is dropped silently: a file that cannot be read or breaks its format is ``Malformed``
(path and reason); a ``results*.json`` that is not lm-eval's is listed as ``ignored``. lm-eval
files inside an evalgate run's folder are that run's evidence and are not counted twice.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal

from evalgate.errors import UsageError
from evalgate.schemas import validation_errors, validator
from evalgate.verdict import GATED_METRIC, Score

RESULT_NAME = "result.json"
META_NAME = "meta_env.json"
CONC_SUFFIX = re.compile(r"_conc(\d+)(?:_\d+)?\.json$")
UNKNOWN = ("", "unknown", "none", "null")


@dataclass(frozen=True)
class Found:
    """One run to gate, whichever tool wrote it."""

    path: str
    source: Literal["evalgate", "lm-eval"]
    model: str | None
    labels: Mapping[str, Any]
    scores: tuple[Score, ...]
    status: str | None = None
    """evalgate: the run's own status; lm-eval: None, or "error" when the harness says so."""
    stage: str | None = None
    reason: str | None = None
    failed_on_scores: bool = False
    """evalgate: the run's own checks failed (so the recorded "fail" is about scores)."""


@dataclass(frozen=True)
class Note:
    """A file that is not a usable result, and why."""

    path: str
    reason: str


@dataclass
class Collection:
    """Everything found under the paths given."""

    found: list[Found] = field(default_factory=list)
    malformed: list[Note] = field(default_factory=list)
    ignored: list[Note] = field(default_factory=list)
    empty: list[str] = field(default_factory=list)


class _Bad(Exception):
    """A file breaks its format; the message says how."""


# -- a compiled schema check: jsonschema's answer, about 40x faster -------------------------------

Check = Callable[[Any], bool]
_TYPES: dict[str, Check] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool))
    or (isinstance(v, float) and v.is_integer()),
}
_NOTES = {"$schema", "$id", "$defs", "$comment", "title", "description", "default", "examples"}
_BOUNDS: dict[str, Callable[[float, float], bool]] = {
    "minimum": lambda v, b: v >= b,
    "maximum": lambda v, b: v <= b,
    "exclusiveMinimum": lambda v, b: v > b,
    "exclusiveMaximum": lambda v, b: v < b,
}
_KNOWN = {"type", "enum", "const", "required", "properties", "additionalProperties", "items",
          "minLength", "minProperties", "minItems", "oneOf", "anyOf", "$ref", *_BOUNDS, *_NOTES}


def _all(checks: list[Check]) -> Check:
    if len(checks) == 1:
        return checks[0]

    def every(value: Any) -> bool:
        return all(check(value) for check in checks)

    return every


def _strings(values: list[Any]) -> frozenset[str]:
    if not all(isinstance(v, str) for v in values):
        raise NotImplementedError("enum/const of non-strings")
    return frozenset(values)


def _object(node: Mapping[str, Any], root: Mapping[str, Any]) -> Check:
    props = {k: compile_schema(v, root) for k, v in node.get("properties", {}).items()}
    required = tuple(node.get("required", ()))
    extra = node.get("additionalProperties", True)
    extra_check = None if isinstance(extra, bool) else compile_schema(extra, root)
    closed = extra is False
    least = node.get("minProperties", 0)

    def check(value: Any) -> bool:
        if not isinstance(value, dict):
            return True
        if len(value) < least or any(key not in value for key in required):
            return False
        for key, item in value.items():
            sub = props.get(key)
            if sub is not None:
                if not sub(item):
                    return False
            elif closed or (extra_check is not None and not extra_check(item)):
                return False
        return True

    return check


def compile_schema(node: Any, root: Mapping[str, Any]) -> Check:
    """A fast validity test for the subset of JSON Schema evalgate's schemas use.

    Raises NotImplementedError on any other keyword, so a caller can fall back to jsonschema.
    """
    if isinstance(node, bool):
        return lambda _: node
    unknown = set(node) - _KNOWN
    if unknown:
        raise NotImplementedError(f"keywords {sorted(unknown)}")
    checks: list[Check] = []
    if "$ref" in node:
        ref = node["$ref"]
        if not ref.startswith("#/$defs/"):
            raise NotImplementedError(f"$ref {ref}")
        checks.append(compile_schema(root["$defs"][ref.removeprefix("#/$defs/")], root))
    if "type" in node:
        types = [node["type"]] if isinstance(node["type"], str) else node["type"]
        tests = [_TYPES[t] for t in types]
        checks.append(lambda v: any(test(v) for test in tests))
    if "const" in node or "enum" in node:
        allowed = _strings(node["enum"] if "enum" in node else [node["const"]])
        checks.append(lambda v: isinstance(v, str) and v in allowed)
    for word, bound in ((w, node[w]) for w in _BOUNDS if w in node):
        test = _BOUNDS[word]
        checks.append(lambda v, t=test, b=bound: not _TYPES["number"](v) or t(v, b))
    if "minLength" in node:
        checks.append(lambda v, n=node["minLength"]: not isinstance(v, str) or len(v) >= n)
    if "minItems" in node:
        checks.append(lambda v, n=node["minItems"]: not isinstance(v, list) or len(v) >= n)
    if {"properties", "required", "additionalProperties", "minProperties"} & set(node):
        checks.append(_object(node, root))
    if "items" in node:
        item = compile_schema(node["items"], root)
        checks.append(lambda v: not isinstance(v, list) or all(item(x) for x in v))
    if "oneOf" in node:
        options = [compile_schema(option, root) for option in node["oneOf"]]
        checks.append(lambda v: sum(1 for option in options if option(v)) == 1)
    if "anyOf" in node:
        options = [compile_schema(option, root) for option in node["anyOf"]]
        checks.append(lambda v: any(option(v) for option in options))
    return _all(checks) if checks else (lambda _: True)


@cache
def _fast_check(name: str) -> Check | None:
    schema = validator(name).schema
    try:
        return compile_schema(schema, schema)
    except NotImplementedError:
        return None


def schema_problems(name: str, document: Any) -> list[str]:
    """validation_errors(), with the compiled check answering first for valid documents."""
    check = _fast_check(name)
    if check is not None and check(document):
        return []
    return validation_errors(name, document)


# -- reading -------------------------------------------------------------------------------------


def _read(path: str) -> Any:
    try:
        with open(path, "rb") as stream:
            return json.loads(stream.read())
    except OSError as exc:
        raise _Bad(f"cannot be read: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise _Bad(f"is not UTF-8 text: {exc.reason}") from exc
    except json.JSONDecodeError as exc:
        raise _Bad(f"is not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg})") from exc


def _evalgate(path: str) -> Found:
    doc = _read(path)
    problems = schema_problems("result", doc)
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise _Bad("does not match result.schema.json: " + "; ".join(problems[:3]) + more)
    labels = doc["labels"]
    return Found(
        path=path,
        source="evalgate",
        model=doc["model"],
        labels={key: labels.get(key) for key in LABELS},
        scores=tuple(
            Score(s["task"], s["metric"], s["filter"], float(s["value"]), s["stderr"], s["n"])
            for s in doc["scores"]
        ),
        status=doc["status"],
        stage=doc["stage"],
        reason=doc["reason"] + (f" ({doc['error']['type']})" if doc.get("error") else ""),
        failed_on_scores=any(not c["passed"] for c in doc["checks"]),
    )


LABELS = ("model_prefix", "hardware", "framework", "precision", "kv_cache_dtype", "isl", "osl",
          "concurrency", "topology")
_SINGLE = ("tp", "ep", "dp_attention", "pp", "dcp_size", "pcp_size")
_PHASES = tuple(f"{phase}_{key}" for phase in ("prefill", "decode")
                for key in ("tp", "ep", "dp_attention", "num_workers", "pp", "dcp_size", "pcp_size"))
_ONE_BY_DEFAULT = {"pp", "dcp_size", "pcp_size"}


def _int(meta: Mapping[str, Any], key: str, bad: list[str]) -> int | None:
    value = meta.get(key)
    if value is None or isinstance(value, bool):
        if isinstance(value, bool):
            bad.append(f"{key} is {value!r}, not an integer")
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    if isinstance(value, str) and value.strip().lower() in UNKNOWN:
        return None
    bad.append(f"{key} is {value!r}, not an integer")
    return None


def _text(meta: Mapping[str, Any], *keys: str) -> str | None:
    for key in keys:
        value = meta.get(key)
        if isinstance(value, str) and value.strip().lower() not in UNKNOWN:
            return value.strip()
    return None


def _flag(value: Any) -> Any:
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return value


def _concs(meta: Mapping[str, Any], key: str, bad: list[str]) -> list[int] | None:
    value = meta.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(
        isinstance(c, int) and not isinstance(c, bool) and c > 0 for c in value
    ):
        bad.append(f"{key} is {value!r}, not a list of positive integers")
        return None
    return value


def _topology(meta: Mapping[str, Any], bad: list[str]) -> dict[str, Any] | None:
    multinode = _flag(meta.get("is_multinode")) is True
    topology: dict[str, Any] = {}
    for key in _PHASES if multinode else _SINGLE:
        short = key.split("_", 1)[1] if multinode else key
        if key not in meta:
            continue
        value = _flag(meta[key]) if "dp_attention" in key else _int(meta, key, bad)
        if value is None or (short in _ONE_BY_DEFAULT and value == 1):
            continue
        topology[key] = value
    spec = _text(meta, "spec_decoding")
    if spec is not None:
        topology["spec_decoding"] = spec
    return topology or None


def meta_labels(meta: Any) -> tuple[str | None, dict[str, Any], dict[str, Any]]:
    """(model, identity labels, batch fields) from a harness meta_env.json; _Bad if malformed."""
    if not isinstance(meta, dict):
        raise _Bad(f"is not a JSON object but {type(meta).__name__}")
    bad: list[str] = []
    labels = {
        "model_prefix": _text(meta, "model_prefix", "infmax_model_prefix"),
        "hardware": _text(meta, "hardware", "hw"),
        "framework": _text(meta, "framework"),
        "precision": _text(meta, "precision"),
        "kv_cache_dtype": _text(meta, "kv_cache_dtype"),
        "isl": _int(meta, "isl", bad) or None,
        "osl": _int(meta, "osl", bad) or None,
        "concurrency": _int(meta, "conc", bad),
        "topology": _topology(meta, bad),
    }
    batch = {
        "eval_concs": _concs(meta, "eval_concs", bad),
        "completed": _concs(meta, "completed_eval_concs", bad),
        "failed": _concs(meta, "failed_eval_concs", bad),
        "exit_code": _int(meta, "eval_exit_code", bad),
    }
    model = _text(meta, "model")
    if model is None and labels["model_prefix"] is None:
        bad.append("neither model nor model_prefix (infmax_model_prefix) is set")
    if bad:
        raise _Bad("is not a valid benchmark meta_env.json: " + "; ".join(bad))
    return model, labels, batch


def lm_eval_scores(doc: Mapping[str, Any]) -> tuple[Score, ...]:
    """Every metric,filter score in an lm-eval results file; _Bad if the gated ones are broken."""
    results = doc.get("results")
    if not isinstance(results, dict):
        raise _Bad("has no \"results\" object")
    counts = doc.get("n-samples") if isinstance(doc.get("n-samples"), dict) else {}
    scores = []
    for task, metrics in results.items():
        if not isinstance(metrics, dict):
            raise _Bad(f"results.{task} is not an object")
        for key, value in metrics.items():
            metric, _, flt = key.partition(",")
            if not flt or metric.endswith("_stderr") or metric != GATED_METRIC:
                continue
            if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value <= 1:
                raise _Bad(f"results.{task}.{key} is {value!r}, not a number in [0, 1]")
            n = (counts.get(task) or {}).get("effective") if isinstance(counts, dict) else None
            if not isinstance(n, int) or isinstance(n, bool) or n < 0:
                raise _Bad(f"n-samples.{task}.effective is {n!r}: the sample size is unknown")
            stderr = metrics.get(f"{metric}_stderr,{flt}")
            ok = isinstance(stderr, int | float) and not isinstance(stderr, bool)
            scores.append(Score(task, metric, flt, float(value), float(stderr) if ok else None, n))
    return tuple(scores)
