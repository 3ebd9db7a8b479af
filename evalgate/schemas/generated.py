"""The schemas generated from their types; ``python -m evalgate.schemas`` writes them."""

from __future__ import annotations

import json

import msgspec

from evalgate.evidence.model import HookSummary, Result, Sample
from evalgate.thresholds import ThresholdsFile

TYPES = {
    "result": ("evalgate result", Result),
    "sample": ("evalgate per-question record (one line of samples.jsonl)", Sample),
    "hook": ("evalgate hook summary (hook.json)", HookSummary),
    "thresholds": ("evalgate thresholds", ThresholdsFile),
}
"""Each generated schema's title and type."""


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
