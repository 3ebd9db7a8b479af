"""The thresholds file (JSON, or YAML as the harness keeps it): read it into its typed model
(schemas/thresholds.schema.json is generated from it), and find the floor for one run
(README.md, "thresholds.json").
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from evalgate.errors import ArtifactError, ThresholdsError, YamlRefused
from evalgate.reader import MAX_CHARS, decode, located, paths, read_bytes, schema_problems
from evalgate.scrub import capped

TASK_KEY = "gsm8k"
Fraction = Annotated[float, msgspec.Meta(gt=0, le=1)]
Floors = Annotated[dict[str, Fraction], msgspec.Meta(min_length=1)]
Named = Annotated[str, msgspec.Meta(min_length=1)]
Label = Literal["model", "model_prefix", "hardware", "precision", "framework", "kv_cache_dtype"]


class Override(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Floors for the runs whose every label in `match` has the given value (the most specific
    override wins); `why` says why, for the next reader."""

    match: Annotated[dict[Label, Named], msgspec.Meta(min_length=1)]
    thresholds: Floors
    why: str = ""


class ThresholdsFile(
    msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename={"schema": "$schema"}
):
    """Minimum scores per task. A result's threshold: an override whose every match key equals
    the run's label (the most specific wins), else the exact model name, else the longest model
    prefix, else default."""

    default: Floors
    models: dict[Named, Floors] = {}
    overrides: tuple[Override, ...] = ()
    schema: str = ""


class Floor(msgspec.Struct, frozen=True):
    """The threshold that applies to one run, and which entry gave it."""

    value: float
    matched: str
    file: str


class Thresholds(msgspec.Struct, frozen=True):
    """A thresholds file read, each rule with its Floors built once: every run a rule matches
    shares them (a sweep holds one per verdict line)."""

    file: ThresholdsFile
    path: str
    default: dict[str, Floor]
    models: dict[str, dict[str, Floor]]
    prefixes: dict[str, dict[str, Floor]]
    overrides: tuple[dict[str, Floor], ...]


def default_path() -> Path:
    return Path(__file__).parent / "thresholds.json"


def parse_thresholds(data: Any, path: str) -> Thresholds:
    """Parsed JSON or YAML as the typed model; errors name the JSON path of the bad value."""
    try:
        file = msgspec.convert(data, ThresholdsFile)
    except msgspec.ValidationError as exc:
        raise ThresholdsError(
            f"{path} is not a valid thresholds file: "
            + "; ".join(capped(problem, 300) for problem in _problems(data, exc)[:5])
            + '. Thresholds are numbers in (0, 1], e.g. {"default": {"gsm8k": 0.90}}.'
        ) from exc

    def floors(given: Mapping[str, float], matched: str) -> dict[str, Floor]:
        return {task: Floor(value, matched, path) for task, value in given.items()}

    matches = (",".join(f"{k}={v}" for k, v in sorted(o.match.items())) for o in file.overrides)
    return Thresholds(
        file,
        path,
        floors(file.default, "default"),
        {model: floors(given, f"model:{model}") for model, given in file.models.items()},
        {model: floors(given, f"prefix:{model}") for model, given in file.models.items()},
        tuple(
            floors(o.thresholds, f"override[{i}]:{match}")
            for i, (o, match) in enumerate(zip(file.overrides, matches, strict=True))
        ),
    )


def _problems(data: Any, exc: msgspec.ValidationError) -> list[str]:
    """What is wrong, in the schema's words (jsonschema loads only for a file refused), else
    msgspec's."""
    from jsonschema import Draft202012Validator

    empty = "$.models: '' should be non-empty"
    problems = [
        f"{p} (an empty key matches every model)" if p == empty else p
        for p in schema_problems(Draft202012Validator(msgspec.json.schema(ThresholdsFile)), data)
    ]
    if not problems:  # NaN passes every comparison in the schema, and then fails every score
        problems = [
            f"{where} is {json.dumps(value)}, not a number in (0, 1]"  # NaN, as JSON spells it
            for where, value in paths(data, "$")  # a schema-valid file holds no number but floors
            if isinstance(value, float) and not math.isfinite(value)
        ]
    return problems or [located(exc)]


def load_thresholds(path: Path | None = None) -> Thresholds:
    """Read and validate a thresholds file, YAML or JSON (the shipped one when path is None)."""
    target = path or default_path()
    text = _text(target)
    suffix = target.suffix.lower()
    if suffix in (".yaml", ".yml"):
        return parse_thresholds(_yaml(text, target), str(target))
    try:
        data = decode(text, where=str(target))
    except ArtifactError as exc:
        syntax = isinstance(exc.__cause__, json.JSONDecodeError)  # else: nested too deep
        data = _yaml(text, target, fallback=True) if syntax and suffix != ".json" else None
        if not isinstance(data, dict):
            raise ThresholdsError(exc.message) from exc
    return parse_thresholds(data, str(target))


def _text(target: Path) -> str:
    """The file's text: a regular file (a FIFO or /dev/zero would never end) of UTF-8, no
    bigger than the YAML reader takes."""
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
    from evalgate.reader import load_yaml

    try:
        return load_yaml(text)
    except YamlRefused as exc:
        if fallback and exc.kind == "syntax":
            return None
        raise ThresholdsError(f"{target} {exc.message}.") from exc


NEAR = 2
"""A thresholds key this many edits or fewer from a known task, and not one, is a misspelling."""


def edits(a: str, b: str, limit: int = NEAR) -> int | None:
    """Levenshtein distance of `a` and `b` when it is at most `limit`, else None: only the band
    of the table within `limit` of its diagonal is filled (a cell outside it is more than
    `limit` edits away), so long keys cost no more per character."""
    if abs(len(a) - len(b)) > limit:
        return None
    far = limit + 1
    row = {j: j for j in range(min(len(b), limit) + 1)}
    for i in range(1, len(a) + 1):
        new = {0: i} if i <= limit else {}
        for j in range(max(1, i - limit), min(len(b), i + limit) + 1):
            new[j] = min(
                row.get(j, far) + 1,
                new.get(j - 1, far) + 1,
                row.get(j - 1, far) + (a[i - 1] != b[j - 1]),
            )
        if min(new.values()) > limit:
            return None
        row = new
    distance = row.get(len(b), far)
    return distance if distance <= limit else None


def check_task_keys(thresholds: Thresholds, tasks: Iterable[str]) -> None:
    """Refuse a floor under a key that names no known task but is within NEAR edits of one, case
    aside ("gsm8K", "gsm8"): the runs it was meant for would be gated on another entry's floor.
    Known: the built-in tasks, the keys of "default", and `tasks` (the run's, or those of the
    results being gated)."""
    from evalgate.tasks.spec import BUILT_IN

    file = thresholds.file
    known = {*BUILT_IN, *file.default, *tasks}
    folded = {task: task.casefold() for task in sorted(known)}
    entries = [(f"$.models.{model}", floors) for model, floors in file.models.items()]
    entries += [
        (f"$.overrides[{index}].thresholds", override.thresholds)
        for index, override in enumerate(file.overrides)
    ]
    for where, floors in entries:
        for key in floors:
            if key in known:
                continue
            near = [
                (distance, task)
                for task, name in folded.items()
                if (distance := edits(key.casefold(), name)) is not None
            ]
            if near:
                distance, meant = min(near)
                how = "only in case" if distance == 0 else f"by {distance} edit(s), case aside"
                raise ThresholdsError(
                    f"{thresholds.path}: {where}.{key} names no known task, but differs from "
                    f"the task {meant!r} {how}: its floor would apply to no run, and a {meant} "
                    f"run would be gated on another entry's. Rename the key {json.dumps(meant)}; "
                    f'or, if {json.dumps(key)} is a task of its own, give it a floor in "default" '
                    "too."
                )


def resolve_floor(
    thresholds: Thresholds,
    model: str | None,
    labels: Mapping[str, Any] | None = None,
    task: str = TASK_KEY,
) -> Floor:
    """The floor for one run's task, by the rules README.md states ("thresholds.json")."""
    labels = dict(labels or {})
    labels.setdefault("model", model)
    overrides = [
        (len(entry.match), index)
        for index, entry in enumerate(thresholds.file.overrides)
        if task in entry.thresholds
        and all(labels.get(key) == want for key, want in entry.match.items())
    ]
    models, prefixes = thresholds.models, thresholds.prefixes
    prefix = labels.get("model_prefix")
    if overrides:
        return thresholds.overrides[max(overrides)[1]][task]
    if model is not None and task in models.get(model, {}):
        return models[model][task]
    if isinstance(prefix, str) and task in prefixes.get(prefix, {}):
        return prefixes[prefix][task]
    if starts := [k for k in prefixes if model and model.startswith(k) and task in prefixes[k]]:
        return prefixes[max(starts, key=len)][task]
    if task in thresholds.default:
        return thresholds.default[task]
    raise ThresholdsError(
        f"{thresholds.path} has no threshold for task {task!r} for model {model!r}: add "
        f'{json.dumps(task)} to "default".'
    )
