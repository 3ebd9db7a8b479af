"""evalgate's JSON schemas, for users and other tools: result, sample and hook generated from
evidence/model.py (``python -m evalgate.schemas``), the others written by hand; what the
generated ones cannot say: docs/architecture.md, "One evidence contract".
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

HERE = Path(__file__).parent
TITLES = {
    "result": "evalgate result",
    "sample": "evalgate per-question record (one line of samples.jsonl)",
    "hook": "evalgate hook summary (hook.json)",
}
"""The schemas generated from evidence/model.py, with their titles."""


def generate(name: str) -> str:
    """The text of ``<name>.schema.json`` as evidence/model.py states it."""
    import msgspec

    from evalgate.evidence.model import HookSummary, Result, Sample

    kind = {"result": Result, "sample": Sample, "hook": HookSummary}[name]
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://evalgate.dev/schemas/{name}.schema.json",
        "title": TITLES[name],
        **msgspec.json.schema(kind),
    }
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


@cache
def validator(name: str) -> Draft202012Validator:
    """jsonschema's validator for ``<name>.schema.json``, built once (jsonschema loads here)."""
    from jsonschema import Draft202012Validator

    return Draft202012Validator(json.loads((HERE / f"{name}.schema.json").read_text("utf-8")))


def _path(parts: Any) -> str:
    path = "$"
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def validation_errors(name: str, document: Any) -> list[str]:
    """Every way the document breaks schema `name`, each as '<json path>: <reason>'."""
    errors = sorted(validator(name).iter_errors(document), key=lambda e: list(e.absolute_path))
    return [f"{_path(error.absolute_path)}: {error.message}" for error in errors]
