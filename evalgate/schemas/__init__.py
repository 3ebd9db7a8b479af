"""evalgate's JSON schemas: the files users and other tools check evalgate's files against.

result, sample and hook are generated from the evidence contract, evidence/model.py
(``python -m evalgate.schemas`` writes them; a test keeps the checked-in files current):
msgspec.json.schema states each Struct, its field types and their ``msgspec.Meta`` bounds.
thresholds, verdict and comparison are written by hand. evalgate itself reads its evidence
with the one reader (evidence/read.py), which decodes into the model; jsonschema serves only
``validation_errors``, for a caller that holds a document and a schema's name.

What the generated schemas cannot say, and how the model holds it instead:

- An integer written as 1.0: JSON Schema's "integer" accepts it, the model's ``int`` refuses
  it (msgspec: "Expected `int`, got `float`").
- NaN and Infinity are not JSON, so no schema speaks of them; the reader takes Python's NaN
  tokens only where the model's float has no bound (a stderr, a latency), and refuses them
  where it states one (a score's value in [0, 1], an e-value >= 0).
- Nesting: a value the model leaves open (``Any``: chat_template_kwargs) may nest as deep as
  the schema likes; the reader refuses a file nested past the interpreter's recursion limit.
- samples.jsonl as a whole: a doc_id on two lines is refused by read_samples (the schema
  states one line).
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

    from evalgate.evidence.hook_summary import HookSummary
    from evalgate.evidence.model import Result, Sample

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
