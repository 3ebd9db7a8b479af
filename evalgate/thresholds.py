"""The thresholds file (JSON, or YAML as the harness keeps it): read it, check it against its
schema, and find the floor for one run (README.md, "thresholds.json").
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from evalgate.errors import ArtifactError, ThresholdsError
from evalgate.evidence.read import decode, read_bytes
from evalgate.outside import capped

TASK_KEY = "gsm8k"


class Thresholds(msgspec.Struct, frozen=True):
    data: dict[str, Any]
    path: str


class Floor(msgspec.Struct, frozen=True):
    """The threshold that applies to one run, and which entry gave it."""

    value: float
    matched: str
    file: str


def default_path() -> Path:
    return Path(__file__).parent / "thresholds.json"


def parse_thresholds(data: Any, path: str) -> Thresholds:
    """Validate parsed JSON; errors name the JSON path of the bad value."""
    from evalgate.schemas import validation_errors  # jsonschema loads only when needed
    from evalgate.yamlfile import paths

    problems = validation_errors("thresholds", data)
    if not problems:  # NaN passes every comparison in the schema, and then fails every score
        problems = [
            f"{where} is {json.dumps(value)}, not a number in (0, 1]"  # NaN, as JSON spells it
            for where, value in paths(data, "$")  # a schema-valid file holds no number but floors
            if isinstance(value, float) and not math.isfinite(value)
        ]
        if "" in data.get("models", {}):  # every model name starts with ""
            problems.append("$.models: '' should be non-empty (an empty key matches every model)")
    if problems:
        raise ThresholdsError(
            f"{path} is not a valid thresholds file: "
            + "; ".join(capped(problem, 300) for problem in problems[:5])  # a value quoted whole
            + '. Thresholds are numbers in (0, 1], e.g. {"default": {"gsm8k": 0.90}}.'
        )
    return Thresholds(data=data, path=path)


def load_thresholds(path: Path | None = None) -> Thresholds:
    """Read and validate a thresholds file, YAML or JSON (the shipped one when path is None)."""
    target = path or default_path()
    text = _text(target)
    suffix = target.suffix.lower()
    if suffix in (".yaml", ".yml"):
        return parse_thresholds(_yaml(text, target), str(target))
    repeated: dict[int, str] = {}

    def no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        found = dict(pairs)
        if len(found) < len(pairs):
            seen: set[str] = set()
            repeated[id(found)] = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        return found

    try:
        data = decode(text, where=str(target), pairs=no_repeats)
    except ArtifactError as exc:
        syntax = isinstance(exc.__cause__, json.JSONDecodeError)  # else: nested too deep
        data = _yaml(text, target, fallback=True) if syntax and suffix != ".json" else None
        if not isinstance(data, dict):
            raise ThresholdsError(exc.message) from exc
        return parse_thresholds(data, str(target))
    if repeated:
        from evalgate.yamlfile import paths

        where, key = next((w, repeated[id(n)]) for w, n in paths(data, "$") if id(n) in repeated)
        raise ThresholdsError(
            f"{target} repeats the key {key!r} in one object ({where}): JSON readers keep only "
            "one of the two values, so the floor is ambiguous. Keep one entry and run again."
        )
    return parse_thresholds(data, str(target))


def _text(target: Path) -> str:
    """The file's text: a regular file (a FIFO or /dev/zero would never end) of UTF-8, no
    bigger than the YAML reader takes."""
    from evalgate.yamlfile import MAX_CHARS

    try:
        return read_bytes(target, MAX_CHARS).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ThresholdsError(
            f"{target} is not UTF-8 text ({exc.reason} at byte {exc.start}): pass a YAML or "
            "JSON thresholds file."
        ) from exc
    except ArtifactError as exc:
        cause = exc.__cause__
        what = (
            f"Cannot read thresholds file {target}: {cause.strerror}."
            if isinstance(cause, OSError)
            else exc.message
        )
        raise ThresholdsError(
            f"{what} Pass --thresholds with an existing file, or leave it out to use the "
            "shipped one."
        ) from exc


def _yaml(text: str, target: Path, *, fallback: bool = False) -> Any:
    """The file read as YAML. As the fallback reading of a file that is not JSON: None where it
    is not YAML either (the JSON error is then the one reported); refused where YAML reads it
    unsafely."""
    from evalgate.yamlfile import YamlRefused, load_yaml

    try:
        return load_yaml(text)
    except YamlRefused as exc:
        if fallback and exc.kind == "syntax":
            return None
        raise ThresholdsError(f"{target} {exc.message}.") from exc


def resolve_floor(
    thresholds: Thresholds,
    model: str | None,
    labels: Mapping[str, Any] | None = None,
    task: str = TASK_KEY,
) -> Floor:
    """The floor for one run's task, by the rules in this module's docstring."""
    labels = dict(labels or {})
    labels.setdefault("model", model)
    data = thresholds.data
    overrides = [
        (index, entry)
        for index, entry in enumerate(data.get("overrides", []))
        if task in entry["thresholds"]
        and all(labels.get(key) == want for key, want in entry["match"].items())
    ]
    models: dict[str, dict[str, float]] = data.get("models", {})
    prefix = labels.get("model_prefix")
    if overrides:
        index, entry = max(overrides, key=lambda pair: (len(pair[1]["match"]), pair[0]))
        matched = ",".join(f"{k}={v}" for k, v in sorted(entry["match"].items()))
        value, matched = entry["thresholds"][task], f"override[{index}]:{matched}"
    elif model is not None and task in models.get(model, {}):
        value, matched = models[model][task], f"model:{model}"
    elif isinstance(prefix, str) and task in models.get(prefix, {}):
        value, matched = models[prefix][task], f"prefix:{prefix}"
    elif starts := [k for k in models if model and model.startswith(k) and task in models[k]]:
        key = max(starts, key=len)
        value, matched = models[key][task], f"prefix:{key}"
    elif task in data["default"]:
        value, matched = data["default"][task], "default"
    else:
        raise ThresholdsError(
            f"{thresholds.path} has no threshold for task {task!r} for model {model!r}: add "
            f'{json.dumps(task)} to "default".'
        )
    return Floor(float(value), matched, thresholds.path)
