"""The environment read without the Settings model: for `evalgate verify`, which stays light
(no pydantic), and the benchmark job's topology variables, whose names vary by launcher."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import NamedTuple

JOB_VARIABLES = re.compile(
    r"^(?:(?:PREFILL|DECODE)_(?:TP|TP_SIZE|EP|ENABLE_EP|NUM_WORKERS|NODES|GPUS|DP|DP_ATTN"
    r"|DP_ATTENTION|ENABLE_DP|PP_SIZE|DCP_SIZE|PCP_SIZE)"
    r"|TP|EP_SIZE|PP_SIZE|DCP_SIZE|PCP_SIZE|DP_ATTENTION|IS_MULTINODE|xP|yD|RECIPE_FINGERPRINT)$"
)
"""The benchmark job's topology variables, which `evalgate hook` records as the harness does."""


def job_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The job's topology variables (PREFILL_TP, DECODE_DP_ATTN, TP, xP, ...) from the
    environment: they label the results, like the fields below, but vary by launcher."""
    source = os.environ if environ is None else environ
    return {name: value for name, value in source.items() if JOB_VARIABLES.match(name)}


class VerifyEnvironment(NamedTuple):
    """What `evalgate verify` takes from its environment (a NamedTuple: `evalgate --help`
    imports this module, and starts without msgspec)."""

    thresholds: str | None
    """EVALGATE_THRESHOLDS: the thresholds file when --thresholds is not given."""
    github_actions: bool
    """GITHUB_ACTIONS=true: running in a GitHub Actions job (annotations and job summary on)."""
    step_summary: str | None
    """GITHUB_STEP_SUMMARY: the file GitHub renders as the job summary."""


def verify_environment(environ: Mapping[str, str] | None = None) -> VerifyEnvironment:
    """The variables `evalgate verify` reads (an empty one counts as unset)."""
    source = os.environ if environ is None else environ
    return VerifyEnvironment(
        thresholds=source.get("EVALGATE_THRESHOLDS") or None,
        github_actions=source.get("GITHUB_ACTIONS") == "true",
        step_summary=source.get("GITHUB_STEP_SUMMARY") or None,
    )
