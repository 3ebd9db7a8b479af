"""evalgate's JSON schemas (result, sample, thresholds, verdict, comparison) and their checks."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator


@cache
def validator(name: str) -> Draft202012Validator:
    """The validator for ``<name>.schema.json``, built once."""
    text = (resources.files("evalgate.schemas") / f"{name}.schema.json").read_text("utf-8")
    return Draft202012Validator(json.loads(text))


def _path(parts: Any) -> str:
    path = "$"
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def validation_errors(name: str, document: Any) -> list[str]:
    """Every way the document breaks schema `name`, each as '<json path>: <reason>'."""
    errors = sorted(validator(name).iter_errors(document), key=lambda e: list(e.absolute_path))
    return [f"{_path(error.absolute_path)}: {error.message}" for error in errors]
