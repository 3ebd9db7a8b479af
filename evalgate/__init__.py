"""evalgate: the accuracy gate for LLM inference benchmarks.

    from evalgate import Settings, run_gate
    outcome = run_gate(Settings(base_url="http://node0:30000/v1", model="m", isl=1024, osl=1024))
    print(outcome.status, outcome.reason)   # exit code in outcome.exit_code

Importing evalgate is light: lm-eval is loaded only when an eval runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evalgate._version import __version__
from evalgate.errors import (
    AbortedError,
    ArtifactError,
    ContextError,
    DatasetError,
    EndpointError,
    EvalFailedError,
    EvalgateError,
    ExitCode,
    NotReadyError,
    ProbeError,
    ThresholdsError,
    UsageError,
)

if TYPE_CHECKING:
    from evalgate.compare import Comparison, compare_runs
    from evalgate.context import EvalContext, Limit, derive_context
    from evalgate.native import NativeLength, load_native_max_len, native_max_len
    from evalgate.run import RunOutcome, run_gate
    from evalgate.settings import Settings
    from evalgate.thresholds import Floor, Thresholds, load_thresholds, resolve_floor
    from evalgate.verdict import Check, Score, Verdict, decide

__all__ = [
    "AbortedError",
    "ArtifactError",
    "Check",
    "Comparison",
    "ContextError",
    "DatasetError",
    "EndpointError",
    "EvalContext",
    "EvalFailedError",
    "EvalgateError",
    "ExitCode",
    "Floor",
    "Limit",
    "NativeLength",
    "NotReadyError",
    "ProbeError",
    "RunOutcome",
    "Score",
    "Settings",
    "Thresholds",
    "ThresholdsError",
    "UsageError",
    "Verdict",
    "__version__",
    "compare_runs",
    "decide",
    "derive_context",
    "load_native_max_len",
    "load_thresholds",
    "native_max_len",
    "resolve_floor",
    "run_gate",
]

# Loaded on first use, so `import evalgate` (and `evalgate verify`) stays light.
_LAZY = {
    "Check": "evalgate.verdict",
    "Comparison": "evalgate.compare",
    "EvalContext": "evalgate.context",
    "Floor": "evalgate.thresholds",
    "Limit": "evalgate.context",
    "NativeLength": "evalgate.native",
    "RunOutcome": "evalgate.run",
    "Score": "evalgate.verdict",
    "Settings": "evalgate.settings",
    "Thresholds": "evalgate.thresholds",
    "Verdict": "evalgate.verdict",
    "compare_runs": "evalgate.compare",
    "decide": "evalgate.verdict",
    "derive_context": "evalgate.context",
    "load_native_max_len": "evalgate.native",
    "load_thresholds": "evalgate.thresholds",
    "native_max_len": "evalgate.native",
    "resolve_floor": "evalgate.thresholds",
    "run_gate": "evalgate.run",
}


def __getattr__(name: str) -> Any:
    """Load the eval machinery (and lm-eval) only when it is asked for."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'evalgate' has no attribute {name!r}")
