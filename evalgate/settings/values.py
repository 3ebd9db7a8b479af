"""The Settings model: flags, then the environment, then defaults (docs/settings.md). Its field
docstrings are the documentation: the table in docs/settings.md is generated from them.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationInfo, field_validator

from evalgate.settings.context import ContextSettings
from evalgate.settings.endpoint import EndpointSettings
from evalgate.settings.evidence import EvidenceSettings
from evalgate.settings.requests import RequestSettings

BLANK_MEANS: dict[str, Any] = {
    **dict.fromkeys(("base_url", "model", "port", "served_model_name", "limit", "concurrency")),
    **dict.fromkeys(("eval_tasks_dir", "spec_decoding", "result_filename")),
    "is_multinode": False,
}
"""What a field set to an empty string holds."""


# A field's place is its group's, the groups in reverse: pydantic orders a model's fields from
# its last base to its first.
class Settings(EvidenceSettings, RequestSettings, ContextSettings, EndpointSettings):
    """Everything an evalgate command can be told."""

    @field_validator(*BLANK_MEANS, "output_dir", mode="before")
    @classmethod
    def _blank(cls, value: Any, info: ValidationInfo) -> Any:
        """A job script's empty variable (EVAL_LIMIT="") means unset, as in the harness; an
        empty output_dir would be read as the working directory itself, so it is refused."""
        if not isinstance(value, str) or value.strip():
            return value
        if info.field_name == "output_dir":
            raise ValueError(
                "an empty folder name would write the evidence into the working directory "
                "itself: pass a folder (the default is evalgate-results), or . for the working "
                "directory"
            )
        return BLANK_MEANS[str(info.field_name)]


def credentials(settings: Settings) -> tuple[list[str | None], list[str | None]]:
    """A command's secrets for scrub.configure: its API key, and --base-url and every
    --worker-url (their user info)."""
    key = settings.api_key.get_secret_value() if settings.api_key is not None else None
    return [key], [settings.base_url, *settings.worker_urls]
