"""evalgate's exceptions: one tree, one exit code per branch.

    EvalgateError                 base; never raised itself
    ├── UsageError           (2)  bad flags, settings, files or data: change an input
    │   ├── ContextError          the eval context cannot be derived from the inputs
    │   ├── ThresholdsError       thresholds.json is malformed
    │   ├── DatasetError          GSM8K files missing, altered or unreadable
    │   ├── ArtifactError         a result file is malformed, or would overwrite another run
    │   └── HistoryError          the history cannot be opened, read or written as asked
    ├── EndpointError        (3)  the engine cannot be used as configured
    │   ├── NotReadyError         the endpoint did not become ready before its deadline
    │   └── ProbeError            the pre-flight request was rejected (or truncates, --strict)
    ├── EvalFailedError      (4)  the eval started but could not finish: no score can be trusted
    └── AbortedError         (6)  stopped by a signal (SIGINT, SIGTERM, SIGHUP, ...)

A score below its threshold is not an exception: it is a verdict (exit 1). Every message says what
happened, with the numbers, and what to do next. The engine's own words are kept verbatim.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any, Literal


class ExitCode(IntEnum):
    """Exit codes of the `evalgate` command. Stable: CI scripts branch on them."""

    PASS = 0
    """The gate passed (run, verify) or the runs are equivalent (compare)."""
    FAIL = 1
    """A score is below its threshold (run, verify) or a regression was found (compare)."""
    USAGE = 2
    """Bad flags, settings, thresholds, result files or dataset: fix the input."""
    ENDPOINT = 3
    """The endpoint never became ready, or the pre-flight probe was rejected."""
    EVAL = 4
    """The eval started but could not finish (requests failed, harness error)."""
    INCONCLUSIVE = 5
    """Too few samples to decide (verify, compare)."""
    ABORTED = 6
    """Stopped by a signal (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1/2); artifacts say how far
    it got."""


VerdictCode = Literal[0, 1, 5]
"""The exit code of a decision (verify's verdict, compare's finding), as their documents write
it: ExitCode.PASS, FAIL or INCONCLUSIVE."""


class EvalgateError(Exception):
    """Base of every error evalgate raises on purpose."""

    exit_code: ExitCode = ExitCode.USAGE

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UsageError(EvalgateError):
    exit_code = ExitCode.USAGE


class ContextError(UsageError):
    """The eval context cannot be derived from the inputs given."""


class ThresholdsError(UsageError):
    """thresholds.json does not match its schema."""


class DatasetError(UsageError):
    """The GSM8K files are missing, altered or unreadable."""


class ArtifactError(UsageError):
    """A result artifact is malformed, or writing it would destroy another run's evidence."""


class HistoryError(UsageError):
    """The history (an SQLite file or a PostgreSQL server) cannot be opened, read or written:
    not a history, a newer schema, a server that cannot be reached or refuses the login."""


class EndpointError(EvalgateError):
    exit_code = ExitCode.ENDPOINT


class NotReadyError(EndpointError):
    """The endpoint did not become ready before its deadline."""


class ProbeError(EndpointError):
    """The pre-flight request was rejected, or would truncate under --strict."""

    engine_error: Any = None
    """The engine's parsed answer (evalgate.engine.wire.EngineError) when it rejected the
    request."""


class EvalFailedError(EvalgateError):
    exit_code = ExitCode.EVAL


class AbortedError(EvalgateError):
    exit_code = ExitCode.ABORTED
