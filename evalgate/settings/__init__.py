"""evalgate's settings: the one place the environment is read.

    values.py       the Settings model (pydantic-settings): flags, then the environment, then
                    defaults; every field a flag and a variable, the harness's names accepted
    environment.py  the few variables read without the model: verify's (it stays light), the
                    credentials scrubbed from every output, the benchmark job's topology

``Settings`` loads pydantic on first use, so `evalgate verify` never pays for it.
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
