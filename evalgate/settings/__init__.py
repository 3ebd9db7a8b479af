"""evalgate's settings: the one place the environment is read (docs/architecture.md, the
layout). ``Settings`` loads pydantic on first use, so `evalgate verify` never pays for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evalgate.settings.environment import (
    JOB_VARIABLES,
    VerifyEnvironment,
    credentials_environment,
    job_environment,
    verify_environment,
)

if TYPE_CHECKING:
    from evalgate.settings.values import Settings

__all__ = [
    "JOB_VARIABLES",
    "Settings",
    "VerifyEnvironment",
    "credentials_environment",
    "job_environment",
    "verify_environment",
]


def __getattr__(name: str) -> Any:
    """Load the Settings model (and pydantic) only when it is asked for."""
    if name == "Settings":
        from evalgate.settings.values import Settings

        return Settings
    raise AttributeError(f"module 'evalgate.settings' has no attribute {name!r}")
