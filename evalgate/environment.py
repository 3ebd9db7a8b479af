"""The environment's names, without the Settings model (`evalgate --help` imports this
module): the variables each setting is read from, the credentials every command scrubs, a CI
job's and the benchmark job's own variables, and the default margin `compare` and `verify`
share.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import NamedTuple

DEFAULT_MAX_DROP = 0.02
"""The default margin of `compare` and `run --baseline`: a drop of up to two points of
accuracy is tolerated."""


def not_a_margin(max_drop: float) -> str | None:
    """Why `max_drop` cannot be a margin, as `compare` and `verify` say it (None: it can)."""
    if 0 <= max_drop < 1:
        return None
    return f"--max-drop {max_drop} is not a fraction in [0, 1): 0.02 means two points of accuracy."


JOB_VARIABLES = re.compile(
    r"^(?:(?:PREFILL|DECODE)_(?:TP|TP_SIZE|EP|ENABLE_EP|NUM_WORKERS|NODES|GPUS|DP|DP_ATTN"
    r"|DP_ATTENTION|ENABLE_DP|PP_SIZE|DCP_SIZE|PCP_SIZE)"
    r"|TP|EP_SIZE|PP_SIZE|DCP_SIZE|PCP_SIZE|DP_ATTENTION|IS_MULTINODE|xP|yD|RECIPE_FINGERPRINT)$"
)
"""The benchmark job's topology variables, which `evalgate hook` records as the harness does."""


def job_environment(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The job's topology variables (PREFILL_TP, DECODE_DP_ATTN, TP, xP, ...) from the
    environment: they label the results, like the fields below, but vary by launcher."""
    return {name: value for name, value in environ.items() if JOB_VARIABLES.match(name)}


class CiEnvironment(NamedTuple):
    """What a CI job's environment says to `evalgate verify`, besides its settings."""

    github_actions: bool
    """GITHUB_ACTIONS=true: running in a GitHub Actions job (annotations and job summary on)."""
    step_summary: str | None
    """GITHUB_STEP_SUMMARY: the file GitHub renders as the job summary."""


def ci_environment(environ: Mapping[str, str] = os.environ) -> CiEnvironment:
    """The CI job's variables `evalgate verify` reads (an empty one counts as unset)."""
    return CiEnvironment(
        github_actions=environ.get("GITHUB_ACTIONS") == "true",
        step_summary=environ.get("GITHUB_STEP_SUMMARY") or None,
    )


class HistoryEnvironment(NamedTuple):
    """What the history takes from a CI job's environment (docs/history.md)."""

    run_id: str | None
    """GITHUB_RUN_ID: the sweep id when --sweep-id is not given (every job of one workflow run
    records into one sweep)."""
    commit: str | None
    """GITHUB_SHA: the commit of the repository the job runs (the harness's), kept per run."""
    image: str | None
    """IMAGE: the container image the job's engine ran in, where the job sets it."""
    who: str
    """Who curates: GITHUB_ACTOR, else USER, else LOGNAME (--by overrides)."""


def history_environment(environ: Mapping[str, str] = os.environ) -> HistoryEnvironment:
    who = next((environ[n] for n in ("GITHUB_ACTOR", "USER", "LOGNAME") if environ.get(n)), "")
    return HistoryEnvironment(
        run_id=environ.get("GITHUB_RUN_ID") or None,
        commit=environ.get("GITHUB_SHA") or None,
        image=environ.get("IMAGE") or None,
        who=who or "unknown",
    )


HARNESS_SAME = (
    "isl",
    "osl",
    "prefill_server_config",
    "decode_server_config",
    "eval_max_model_len",
    "port",
    "model",
    "worker_urls",
    "model_prefix",
    "framework",
    "precision",
    "kv_cache_dtype",
    "spec_decoding",
    "is_multinode",
    "result_filename",
    "eval_tasks_dir",
    "sglang_simulate_acc_len",
)
"""Settings the benchmark harness sets under the field's own name in upper case (ISL, PORT)."""
HARNESS_NAMES = {
    "model_config_path": ("EVALGATE_MODEL_CONFIG", "MODEL_PATH"),
    "base_url": ("ROUTER_URL", "OPENAI_BASE_URL"),
    "served_model_name": ("MODEL_NAME",),
    "api_key": ("OPENAI_API_KEY",),
    "hardware": ("RUNNER_TYPE",),
    "limit": ("EVAL_LIMIT",),
    "concurrency": ("EVAL_CONC", "EVAL_CONCURRENT_REQUESTS", "CONC"),
    "record": ("EVALGATE_HISTORY",),
}
"""The other settings the harness (or a launcher, or the OpenAI client) sets, under its names,
and the names evalgate read them by before (EVALGATE_HISTORY for --record)."""


def variables(field: str) -> tuple[str, ...]:
    """The variables that set a field, in the order they are looked up: its own EVALGATE_
    variable, then the harness's names (settings/sources.py reads them; every command scrubs
    the credentials among them, credentials_environment)."""
    harness = (field.upper(),) if field in HARNESS_SAME else HARNESS_NAMES.get(field, ())
    return (f"EVALGATE_{field.upper()}", *harness)


def credentials_environment(environ: Mapping[str, str] = os.environ) -> tuple[list[str], list[str]]:
    """Every API key and URL set in the environment, for every command to scrub from its output
    (verify and compare too, which read no settings): (keys, URLs)."""
    keys = [environ[n] for n in variables("api_key") if environ.get(n)]
    urls = [environ[n] for n in variables("base_url") if environ.get(n)]
    for name in variables("worker_urls"):
        urls += [part.strip() for part in environ.get(name, "").split(",") if part.strip()]
    return keys, urls
