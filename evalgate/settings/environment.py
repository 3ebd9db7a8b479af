"""The environment read without the Settings model: for `evalgate verify` (no pydantic), the
credentials every command scrubs, and the job's topology variables, named as each launcher does;
and the default `compare` and `verify` share with the Settings model.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import NamedTuple

DEFAULT_MAX_DROP = 0.02
"""The default margin of `compare` and `run --baseline`: a drop of up to two points of
accuracy is tolerated."""

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


CREDENTIAL_VARIABLES = {
    "api_key": ("EVALGATE_API_KEY", "OPENAI_API_KEY"),
    "base_url": ("EVALGATE_BASE_URL", "ROUTER_URL", "OPENAI_BASE_URL"),
    "worker_urls": ("EVALGATE_WORKER_URLS", "WORKER_URLS"),
}
"""The variables Settings reads its secret-bearing fields from (a test checks they agree)."""


def credentials_environment(
    environ: Mapping[str, str] | None = None,
) -> tuple[list[str], list[str]]:
    """Every API key and URL set in the environment, for every command to scrub from its output
    (verify and compare too, which read no settings): (keys, URLs)."""
    source = os.environ if environ is None else environ
    keys = [source[n] for n in CREDENTIAL_VARIABLES["api_key"] if source.get(n)]
    urls = [source[n] for n in CREDENTIAL_VARIABLES["base_url"] if source.get(n)]
    for name in CREDENTIAL_VARIABLES["worker_urls"]:
        urls += [part.strip() for part in source.get(name, "").split(",") if part.strip()]
    return keys, urls
