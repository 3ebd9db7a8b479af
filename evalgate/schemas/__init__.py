"""evalgate's JSON schemas, for users and other tools: each generated from its type (TYPES:
result, sample and hook from evidence/model.py, thresholds from thresholds.py, verdict from
verify/document.py, comparison from compare/views.py; ``python -m evalgate.schemas`` writes
them), and verdict-1, the frozen schema of the verdicts written before evalgate.verdict/2; what
the generated ones cannot say: docs/architecture.md, "One evidence contract".
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from evalgate.compare.views import ComparisonDocument
from evalgate.evidence.model import HookSummary, Result, Sample
from evalgate.reader import schema_problems
from evalgate.thresholds import ThresholdsFile
from evalgate.verify.document import VerdictDocument

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

HERE = Path(__file__).parent


@cache
def validator(name: str) -> Draft202012Validator:
    """jsonschema's validator for ``<name>.schema.json``, built once (jsonschema loads here)."""
    from jsonschema import Draft202012Validator

    return Draft202012Validator(json.loads((HERE / f"{name}.schema.json").read_text("utf-8")))


def validation_errors(name: str, document: Any) -> list[str]:
    """Every way the document breaks schema `name`, each as '<json path>: <reason>'."""
    return schema_problems(validator(name), document)


# No schema is shipped but these and those FROZEN.

TYPES = {
    "result": ("evalgate result", Result),
    "sample": ("evalgate per-question record (one line of samples.jsonl)", Sample),
    "hook": ("evalgate hook summary (hook.json)", HookSummary),
    "thresholds": ("evalgate thresholds", ThresholdsFile),
    "verdict": ("evalgate verify verdict", VerdictDocument),
    "comparison": ("evalgate comparison (evalgate compare --json)", ComparisonDocument),
}
"""Each generated schema's title and type."""
FROZEN = ("verdict-1",)
"""The schemas of earlier versions, kept as they were for the documents written then."""


def generate(name: str) -> str:
    """The text of ``<name>.schema.json`` as its type states it."""
    title, kind = TYPES[name]
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://evalgate.dev/schemas/{name}.schema.json",
        "title": title,
        **msgspec.json.schema(kind),
    }
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"
