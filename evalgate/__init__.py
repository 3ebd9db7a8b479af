"""evalgate: the accuracy gate for LLM inference benchmarks (Python use: README.md)."""

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
    from evalgate.compare.comparison import Comparison, compare_runs
    from evalgate.context.budget import EvalContext, derive_context
    from evalgate.context.limits import NativeLength, load_native_max_len, native_max_len
    from evalgate.evidence.model import Check, HookSummary, Limit, Result, Sample, Score
    from evalgate.evidence.outputs import run_identity
    from evalgate.gate.verdict import Verdict, decide
    from evalgate.run import RunOutcome, run_gate
    from evalgate.settings.values import Settings
    from evalgate.thresholds import Floor, Thresholds, load_thresholds, resolve_floor

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
    "HookSummary",
    "Limit",
    "NativeLength",
    "NotReadyError",
    "ProbeError",
    "Result",
    "RunOutcome",
    "Sample",
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
    "run_identity",
]

# Loaded on first use, so `import evalgate` (and `evalgate verify`) stays light.
_LAZY = {
    name: module
    for module, names in {
        "evalgate.compare.comparison": ("Comparison", "compare_runs"),
        "evalgate.evidence.outputs": ("run_identity",),
        "evalgate.evidence.model": ("Check", "HookSummary", "Limit", "Result", "Sample", "Score"),
        "evalgate.context.budget": ("EvalContext", "derive_context"),
        "evalgate.context.limits": ("NativeLength", "load_native_max_len", "native_max_len"),
        "evalgate.run": ("RunOutcome", "run_gate"),
        "evalgate.gate.verdict": ("Verdict", "decide"),
        "evalgate.settings.values": ("Settings",),
        "evalgate.thresholds": ("Floor", "Thresholds", "load_thresholds", "resolve_floor"),
    }.items()
    for name in names
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'evalgate' has no attribute {name!r}")
