"""The schemas generated from their types; ``python -m evalgate.schemas`` writes them. No other
schema is shipped but those FROZEN."""

from __future__ import annotations

import json

import msgspec

from evalgate.compare.document import ComparisonDocument
from evalgate.evidence.model import HookSummary, Result, Sample
from evalgate.thresholds import ThresholdsFile
from evalgate.verify.document import VerdictDocument

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
