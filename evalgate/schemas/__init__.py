"""evalgate's JSON schemas, for users and other tools: each generated from its type
(schemas/generated.py: result, sample and hook from evidence/model.py, thresholds from
thresholds.py, verdict from verify/document.py, comparison from compare/document.py), and
verdict-1, the frozen schema of the verdicts written before evalgate.verdict/2; what the
generated ones cannot say: docs/architecture.md, "One evidence contract".
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalgate.evidence.read import schema_problems

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
