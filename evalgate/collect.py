"""Finding a sweep's eval results on disk and reading each into one shape (the I/O edge of verify).

Two kinds of artifact are found under each path given:

- evalgate's ``result.json`` (checked against result.schema.json);
- the benchmark harness's plain lm-eval output: ``results*.json`` holding ``lm_eval_version``,
  with the run's ``meta_env.json`` in the same folder or the one above it (lm-eval nests its
  output under the model's name). A harness batch (``eval_concs`` in meta_env.json) names each
  file ``..._conc<N>.json``; concurrencies listed in ``failed_eval_concs``, or listed but
  without a file, come back as errored runs, and so does a meta_env.json with no results at all
  (the eval failed, was skipped, or was never staged).

An ``evalgate hook`` summary (``hook.json``) adds the concurrencies it lists as "not run" as
skipped runs, labelled like their siblings. Nothing is dropped silently: a file that cannot be
read or breaks its format is a ``Note`` in ``malformed`` (path and reason); a ``results*.json``
that is not lm-eval's is listed as ``ignored``. lm-eval files and meta_env.json inside an
evalgate run's folder are that run's evidence and are not counted twice.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal

from evalgate.errors import UsageError
from evalgate.schemas import validation_errors, validator
from evalgate.verdict import GATED_METRIC, Score

RESULT_NAME = "result.json"
META_NAME = "meta_env.json"
HOOK_NAME = "hook.json"
CONC_SUFFIX = re.compile(r"_conc(\d+)(?:_\d+)?\.json$")
UNKNOWN = ("", "unknown", "none", "null")
LABELS = (
    "model_prefix",
    "hardware",
    "framework",
    "precision",
    "kv_cache_dtype",
    "isl",
    "osl",
    "concurrency",
    "topology",
)
"""The labels that, with the model, identify a config (result.schema.json's labels)."""


@dataclass(frozen=True)
class Found:
    """One run to gate, whichever tool wrote it."""

    path: str
    source: Literal["evalgate", "lm-eval"]
    model: str | None
    labels: Mapping[str, Any]
    scores: tuple[Score, ...]
    status: str | None = None
    """evalgate: the run's own status, or "skipped" (listed as not run in an `evalgate hook`
    summary); lm-eval: None, or "error" when the harness says the eval failed."""
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


# -- a compiled schema check: jsonschema's answer for a valid document, 50 times faster ------------

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
_FAILS = {
    "minimum": "{v} < {b}",
    "maximum": "{v} > {b}",
    "exclusiveMinimum": "{v} <= {b}",
    "exclusiveMaximum": "{v} >= {b}",
}


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
        if "type" in node:
            names = [node["type"]] if isinstance(node["type"], str) else node["type"]
            fails.append("not (" + " or ".join(_TESTS[name] for name in names).format(v=v) + ")")
        if "enum" in node or "const" in node:
            fails.append(f"not ({self.enum(node.get('enum', [node.get('const')]), v)})")
        number = _TESTS["number"].format(v=v)
        fails += [
            f"{number} and " + test.format(v=v, b=repr(node[word]))
            for word, test in _FAILS.items()
            if word in node
        ]
        fails += [
            f"isinstance({v}, {kind}) and len({v}) < {node[word]}"
            for word, kind in (
                ("minLength", "str"),
                ("minItems", "list"),
                ("minProperties", "dict"),
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
        out = [f"{pad}if isinstance({v}, dict):"]
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


@cache
def _fast_check(name: str) -> Check | None:
    try:
        schema = validator(name).schema
        return compile_schema(schema) if isinstance(schema, Mapping) else None
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
            return json.loads(stream.read().decode("utf-8"))
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


def _evalgate_or_note(path: str) -> Found | Note:
    try:
        return _evalgate(path)
    except _Bad as exc:
        return Note(path, f"{path} {exc}")


_SINGLE = ("tp", "ep", "dp_attention", "pp", "dcp_size", "pcp_size")
_PHASES = tuple(
    f"{phase}_{key}"
    for phase in ("prefill", "decode")
    for key in ("tp", "ep", "dp_attention", "num_workers", *_SINGLE[3:])
)
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
    """The exact_match scores (every filter) in an lm-eval results file; _Bad if broken."""
    results = doc.get("results")
    if not isinstance(results, dict):
        raise _Bad('has no "results" object')
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
            sizes = counts.get(task) if isinstance(counts, dict) else None
            n = sizes.get("effective") if isinstance(sizes, dict) else None
            if not isinstance(n, int) or isinstance(n, bool) or n < 0:
                raise _Bad(f"n-samples.{task}.effective is {n!r}: the sample size is unknown")
            stderr = metrics.get(f"{metric}_stderr,{flt}")
            ok = isinstance(stderr, int | float) and not isinstance(stderr, bool)
            error = float(stderr) if ok and stderr is not None else None
            scores.append(Score(task, metric, flt, float(value), error, n))
    return tuple(scores)


# -- one harness eval set: a meta_env.json and the lm-eval results it describes --------------------

Staged = tuple[str, tuple[Score, ...], "str | None"]
"""(path, scores, model) of one lm-eval results file."""


def _lm_run(
    path: str,
    model: str | None,
    labels: Mapping[str, Any],
    conc: int | None,
    *,
    scores: tuple[Score, ...] = (),
    error: str | None = None,
) -> Found:
    return Found(
        path,
        "lm-eval",
        model,
        {**labels, "concurrency": conc},
        scores,
        "error" if error else None,
        "eval" if error else None,
        error,
    )


def _single(
    meta_path: str,
    model: str | None,
    labels: Mapping[str, Any],
    *,
    exit_code: int | None,
    runs: list[Staged],
    files: int,
) -> list[Found | Note]:
    conc = labels["concurrency"]
    if exit_code:
        failed = f"the harness recorded eval_exit_code = {exit_code} in {meta_path}"
        paths = [path for path, _, _ in runs] or [meta_path]
        return [_lm_run(path, model, labels, conc, error=failed) for path in paths]
    if not files:
        return [
            _lm_run(
                meta_path,
                model,
                labels,
                conc,
                error=(
                    "meta_env.json has no lm-eval results*.json beside it: the eval failed, was "
                    "skipped, or its results were never staged"
                ),
            )
        ]
    return [_lm_run(path, name, labels, conc, scores=scores) for path, scores, name in runs]


def _batch(
    meta_path: str,
    model: str | None,
    labels: Mapping[str, Any],
    batch: Mapping[str, Any],
    runs: list[Staged],
) -> list[Found | Note]:
    items: list[Found | Note] = []
    failed = set(batch["failed"] or ())
    by_conc: dict[int, list[Staged]] = {}
    for path, scores, name in runs:
        match = CONC_SUFFIX.search(os.path.basename(path))
        if match is None:
            items.append(
                Note(
                    path,
                    f"{path} has no _conc<N> suffix although {meta_path} "
                    "describes a batch (eval_concs): its concurrency is unknown",
                )
            )
        else:
            by_conc.setdefault(int(match.group(1)), []).append((path, scores, name))
    listed = set(batch["eval_concs"]) | set(batch["completed"] or ()) | failed
    for conc in sorted(listed | set(by_conc)):
        staged = by_conc.get(conc, [])
        if conc in failed:
            items.append(
                _lm_run(
                    staged[0][0] if staged else meta_path,
                    model,
                    labels,
                    conc,
                    error=f"the harness lists concurrency {conc} in "
                    f"failed_eval_concs of {meta_path}",
                )
            )
        elif not staged:
            items.append(
                _lm_run(
                    meta_path,
                    model,
                    labels,
                    conc,
                    error=(
                        f"meta_env.json lists concurrency {conc} but no results*_conc{conc}.json "
                        "was staged: that eval failed, was skipped, or its results were lost"
                    ),
                )
            )
        items += [
            _lm_run(path, name, labels, conc, scores=scores)
            for path, scores, name in staged
            if conc not in failed
        ]
    return items


def _harness_set(meta_path: str, files: list[tuple[str, Any]]) -> list[Found | Note]:
    """The runs one meta_env.json and its lm-eval results describe."""
    try:
        model, labels, batch = meta_labels(_read(meta_path))
    except _Bad as exc:
        lost = f"; the {len(files)} lm-eval result(s) it describes go unchecked" if files else ""
        return [Note(meta_path, f"{meta_path} {exc}{lost}")]
    items: list[Found | Note] = []
    runs: list[Staged] = []
    for path, doc in files:
        try:
            runs.append((path, lm_eval_scores(doc), model or _text(doc, "model_name")))
        except _Bad as exc:
            items.append(Note(path, f"{path} {exc}"))
    if batch["eval_concs"] is None:
        return items + _single(
            meta_path, model, labels, exit_code=batch["exit_code"], runs=runs, files=len(files)
        )
    return items + _batch(meta_path, model, labels, batch, runs)


def _within_run(folder: str, root: str, run_dirs: set[str]) -> bool:
    """Whether `folder` is (inside) an evalgate run's output folder, looking no higher than root."""
    while True:
        if folder in run_dirs:
            return True
        parent = os.path.dirname(folder)
        if folder in (root, parent):
            return False
        folder = parent


@dataclass
class _Tree:
    """The files under one root that verify reads."""

    results: list[str] = field(default_factory=list)
    metas: dict[str, str] = field(default_factory=dict)
    """meta_env.json path by folder."""
    candidates: list[str] = field(default_factory=list)
    hooks: list[str] = field(default_factory=list)


def _files(root: str) -> _Tree:
    tree = _Tree()
    folders = [root]
    while folders:
        folder = folders.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError as exc:
            raise UsageError(f"Cannot list {folder}: {exc.strerror}.") from exc
        for entry in entries:
            name = entry.name
            if entry.is_dir(follow_symlinks=False):
                folders.append(entry.path)
            elif name == RESULT_NAME:
                tree.results.append(entry.path)
            elif name == META_NAME:
                tree.metas[folder] = entry.path
            elif name == HOOK_NAME:
                tree.hooks.append(entry.path)
            elif name.startswith("results") and name.endswith(".json"):
                tree.candidates.append(entry.path)
    return tree


def _hook(path: str, found: Sequence[Found]) -> list[Found | Note]:
    """The runs an `evalgate hook` summary lists as "not run" (an earlier run stopped it)."""
    try:
        doc = _read(path)
    except _Bad as exc:
        return [Note(path, f"{path} {exc}")]
    runs = doc.get("runs") if isinstance(doc, dict) else None
    if not isinstance(runs, list) or not all(isinstance(run, dict) for run in runs):
        return [Note(path, f'{path} is not an evalgate hook summary: no "runs" list')]
    folder = os.path.dirname(path) + os.sep
    sibling = next((f for f in found if f.path.startswith(folder)), None)
    labels = dict(sibling.labels) if sibling else dict.fromkeys(LABELS)
    return [
        Found(
            path,
            "evalgate",
            sibling.model if sibling else None,
            {**labels, "concurrency": run.get("concurrency")},
            (),
            "skipped",
            None,
            str(run.get("reason") or "not run"),
        )
        for run in runs
        if run.get("status") == "not run"
    ]


def _add(out: Collection, item: Found | Note) -> None:
    if isinstance(item, Note):
        out.malformed.append(item)
    else:
        out.found.append(item)


def _scan(root: str, out: Collection) -> None:
    tree = _files(root)
    results, metas = tree.results, tree.metas
    for path in results:
        _add(out, _evalgate_or_note(path))
    for path in tree.hooks:
        for item in _hook(path, out.found):
            _add(out, item)
    run_dirs = {os.path.dirname(path) for path in results}
    sets: dict[str, list[tuple[str, Any]]] = {
        meta: [] for folder, meta in metas.items() if not _within_run(folder, root, run_dirs)
    }
    for path in tree.candidates:
        folder = os.path.dirname(path)
        if _within_run(folder, root, run_dirs):
            continue  # the lm-eval output an evalgate run keeps as evidence
        try:
            doc = _read(path)
        except _Bad as exc:
            out.malformed.append(Note(path, f"{path} {exc}"))
            continue
        if not isinstance(doc, dict) or "lm_eval_version" not in doc:
            out.ignored.append(Note(path, f"{path} is not an lm-eval result (no lm_eval_version)"))
            continue
        meta = metas.get(folder) or metas.get(os.path.dirname(folder))
        if meta is None or meta not in sets:
            out.malformed.append(
                Note(
                    path,
                    (
                        f"{path} is an lm-eval result with no meta_env.json beside it (or one "
                        "folder up): its config is unknown. Stage the run's meta_env.json "
                        "with it."
                    ),
                )
            )
            continue
        sets[meta].append((path, doc))
    for meta, files in sets.items():
        for item in _harness_set(meta, files):
            _add(out, item)


def _covered(paths: list[str]) -> set[int]:
    """Indexes of paths already searched as (part of) another path given before or around it."""
    full = [os.path.abspath(path) for path in paths]
    return {
        i
        for i, path in enumerate(full)
        for j, other in enumerate(full)
        if i != j and (path.startswith(other + os.sep) or (path == other and j < i))
    }


def collect(paths: Iterable[str]) -> Collection:
    """Every result under `paths` (folders, searched recursively, or evalgate result files).

    A path inside another one given (or given twice) is searched once.
    """
    out = Collection()
    roots = list(paths)
    skip = _covered(roots) if len(roots) > 1 else set()
    for index, root in enumerate(roots):
        if not os.path.exists(root):
            raise UsageError(
                f"{root} does not exist. Pass the folder the sweep's artifacts were downloaded "
                "to, or an evalgate result.json."
            )
        if index in skip:
            continue
        before = len(out.found) + len(out.malformed)
        if os.path.isdir(root):
            _scan(os.path.normpath(root), out)
        elif os.path.basename(root) == META_NAME or re.fullmatch(
            r"results.*\.json", os.path.basename(root)
        ):
            raise UsageError(
                f"{root} is part of a benchmark harness eval: pass the folder that holds "
                f"meta_env.json and its lm-eval results, not the file."
            )
        else:
            _add(out, _evalgate_or_note(root))
        if len(out.found) + len(out.malformed) == before:
            out.empty.append(root)
    return out
