"""The data a user's task file names, read and checked before anything is sent: lm-eval reads it
only after the probe, where a bad file would end the eval after its requests went out
(RELIABILITY.md, "Task and thresholds files that try to do harm").
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evalgate.errors import ArtifactError, DatasetError, UsageError
from evalgate.evidence.read import decode, read_bytes
from evalgate.tasks.dataset import Dataset
from evalgate.tasks.syntax import FIELD

TEMPLATES = ("description", "doc_to_text", "doc_to_target")


def load_file_data(config: Mapping[str, Any], source: Path, num_fewshot: int) -> Dataset:
    """The data a user's task file (`source`, read into `config`) names, every file read and
    checked."""
    files = {split: Path(f) for split, f in config["dataset_kwargs"]["data_files"].items()}
    test_split = str(config["test_split"])
    shot_split = str(config.get("fewshot_split") or config.get("training_split") or "")
    if test_split not in files:
        raise UsageError(f"{source}: its data_files have no {test_split!r} (its test_split).")
    if num_fewshot and shot_split not in files:
        raise UsageError(
            f"{source}: {num_fewshot}-shot needs the shots' split: name it in "
            "fewshot_split (or training_split) and in data_files."
        )
    fields = needed_fields(config)  # a shot is rendered by doc_to_text and doc_to_target only
    shot = {name: key for name, key in fields.items() if key in ("doc_to_text", "doc_to_target")}
    needs = {shot_split: shot} if num_fewshot else {}
    rows, sha256 = {}, {}
    for split, path in files.items():
        try:
            data = read_bytes(path)
        except ArtifactError as exc:
            raise DatasetError(
                f"{exc.message} The task file's data_files must name local JSONL files."
            ) from exc
        sha256[split] = hashlib.sha256(data).hexdigest()
        rows[split] = _rows(path, data, fields if split == test_split else needs.get(split, {}))
    if not rows[test_split]:
        raise DatasetError(f"{files[test_split]} holds no questions (its lines are empty).")
    train = rows[shot_split] if num_fewshot else []
    shots = len(train) - (config.get("fewshot_split") == test_split)  # the doc is no shot
    if num_fewshot > shots:
        raise UsageError(
            f"{source}: num_fewshot is {num_fewshot}, but {files[shot_split]} holds "
            f"{shots} shot(s) to draw from. Lower num_fewshot or give more examples."
        )
    return Dataset(source="dir", files=files, sha256=sha256, test=rows[test_split], train=train)


def needed_fields(config: Mapping[str, Any]) -> dict[str, str]:
    """{field: what needs it} for every field a template (or a filter) reads from a row."""
    fields = {name: key for key in TEMPLATES for name in FIELD.findall(str(config.get(key) or ""))}
    steps = [step for entry in config.get("filter_list", []) for step in entry["filter"]]
    if any(step["function"] == "multi_choice_regex" for step in steps):
        fields["choices"] = "the multi_choice_regex filter"
    return fields


def _unique(pairs: list[tuple[str, Any]], where: str) -> dict[str, Any]:
    """An object whose keys are all different (the datasets library refuses a row repeating
    one, after the probe)."""
    row = dict(pairs)
    if len(row) < len(pairs):
        seen: set[str] = set()
        key = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise DatasetError(f"{where} repeats the field {key!r}. Keep one.")
    return row


def _rows(path: Path, data: bytes, fields: dict[str, str]) -> list[dict[str, Any]]:
    """One JSON object per line (blank lines skipped), each holding `fields`."""
    rows = []
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path} line {number}"
        try:
            row = decode(line, Any, where, pairs=functools.partial(_unique, where=where))
        except ArtifactError as exc:
            raise DatasetError(exc.message) from exc
        if not isinstance(row, dict):
            raise DatasetError(f"{where} is a JSON {type(row).__name__}, not an object of fields.")
        missing = next((name for name in fields if name not in row), None)
        if missing is not None:
            raise DatasetError(
                f"{where} has no field {missing!r}, which {fields[missing]} names. Give every "
                "row that field, or change the task file."
            )
        choices = row.get("choices") if "choices" in fields else []
        if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
            raise DatasetError(f"{where}: its choices must be a list of text.")
        rows.append(row)
    return rows
