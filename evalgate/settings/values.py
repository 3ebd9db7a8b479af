"""The Settings model: flags, then the environment, then defaults (README.md, "Settings"). Its
field docstrings are the documentation: the README's settings table is generated from them.
"""

from __future__ import annotations

from typing import Any

from pydantic import field_validator

from evalgate.settings.context import ContextSettings
from evalgate.settings.endpoint import EndpointSettings
from evalgate.settings.evidence import EvidenceSettings
from evalgate.settings.fields import TOKEN_LENGTHS, token_count
from evalgate.settings.requests import RequestSettings

__all__ = ["TOKEN_LENGTHS", "Settings", "token_count"]


# A field's place is its group's, the groups in reverse: pydantic orders a model's fields from
# its last base to its first.
class Settings(EvidenceSettings, RequestSettings, ContextSettings, EndpointSettings):
    """Everything an evalgate command can be told."""

    @field_validator(
        "base_url",
        "model",
        "port",
        "served_model_name",
        "limit",
        "concurrency",
        "eval_tasks_dir",
        "spec_decoding",
        "result_filename",
        mode="before",
    )
    @classmethod
    def _blank_is_unset(cls, value: Any) -> Any:
        """A job script's empty variable (EVAL_LIMIT="") means unset, as in the harness."""
        if isinstance(value, str) and not value.strip():
            return None
        return value
