"""evalgate's exceptions: one tree, one exit code per branch (the codes: ExitCode, below).

    EvalgateError                 base; never raised itself
    ├── UsageError         USAGE  bad flags, settings, files or data: change an input
    │   ├── ContextError          the eval context cannot be derived from the inputs
    │   ├── ThresholdsError       thresholds.json is malformed
    │   ├── DatasetError          GSM8K files missing, altered or unreadable
    │   ├── ArtifactError         a result file is malformed, or would overwrite another run
    │   ├── HistoryError          the history cannot be opened, read or written as asked
    │   ├── YamlRefused           a YAML file the one reader (reader.py) does not take
    │   └── FormatError           a benchmark harness file breaks its format
    ├── EndpointError      ENDPOINT  the engine cannot be used as configured
    │   ├── NotReadyError         the endpoint did not become ready before its deadline
    │   ├── ProbeError            the pre-flight request was rejected (or truncates, --strict)
    │   ├── RequestFailed         a request got no usable answer in all its attempts
    │   └── what one attempt got instead of an answer (engine/http.py: which are retried)
    │       ├── EngineAnswerError     the engine's error answer, parsed
    │       ├── TransientAnswer       an answer that may be right next time
    │       │   ├── TimedOut          no whole answer within the request's deadline
    │       │   └── MalformedAnswer   a 200 whose body is not what was asked for
    │       ├── AnswerTooLarge        past --max-response-bytes, decoded
    │       └── ConnectionFailed      no answer: the connection refused, reset or closed
    │           └── HostSilent        the host stopped answering (connect deadline, keepalive)
    ├── EvalFailedError    EVAL   the eval started but could not finish: no score can be trusted
    │   ├── OverBudget            more requests failed than --max-failed-requests allows
    │   └── WorkerLost            a worker behind the router stopped answering
    └── AbortedError       ABORTED  stopped by a signal (SIGINT, SIGTERM, SIGHUP, ...)

A score below its threshold is not an exception: it is a verdict (ExitCode.FAIL). Every message
says what happened, with the numbers, and what to do next. The engine's own words are kept
verbatim. The engine's failures under EndpointError are caught where they happen (the probe
makes a ProbeError of them, the eval an EvalFailedError); should one escape, it is still this
tree's, with an exit code that says "the engine".
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any, Literal


class ExitCode(IntEnum):
    """Exit codes of the `evalgate` command. Stable: CI scripts branch on them. Each one's
    `meaning` is the one statement of it: the --help epilog and the README's table are made
    from it (and the README's is checked against it)."""

    PASS = 0
    FAIL = 1
    USAGE = 2
    ENDPOINT = 3
    EVAL = 4
    INCONCLUSIVE = 5
    ABORTED = 6

    @property
    def meaning(self) -> str:
        return _MEANINGS[self]


_MEANINGS = {
    ExitCode.PASS: "pass (`run`, `hook`, `verify`), equivalent (`compare`)",
    ExitCode.FAIL: "a score below its threshold, too many truncated answers, a regression "
    "(`compare`; `verify --baseline`, unless waived), or any failed, errored, malformed, "
    "missing or unexpected result (`verify`)",
    ExitCode.USAGE: "usage: bad flags, settings, config file, thresholds file, result files, "
    "dataset files, an output folder that already holds a result, `run`/`hook` without the "
    "eval extra, or a history that cannot be opened (not a history, a newer schema, a server "
    "that cannot be reached or refuses the login)",
    ExitCode.ENDPOINT: "the endpoint never became ready, or the pre-flight probe was rejected",
    ExitCode.EVAL: "the eval started but could not finish (a request the engine rejected, "
    "failed requests over the budget, a harness error)",
    ExitCode.INCONCLUSIVE: "inconclusive: too few samples to decide (`verify`, `compare`)",
    ExitCode.ABORTED: "aborted by a signal: SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1/2, in "
    "every command, from the first instant (the result says how far it got; a run stopped "
    "before it took its folder writes nothing and says so)",
}


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
    with_usage = False
    """A setting's value refused: said under the command's usage line, as argparse says a flag's."""


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


class YamlRefused(UsageError):
    """A YAML file the one reader (evalgate.reader) does not take; `kind` says why, the
    message where. Whoever reads the file says which file it was."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        """"syntax", "alias", "nesting", "size", "repeated", "key", "tag" or "integer"."""


class FormatError(UsageError):
    """A benchmark harness file breaks its format; the message says how."""


class EndpointError(EvalgateError):
    exit_code = ExitCode.ENDPOINT


class NotReadyError(EndpointError):
    """The endpoint did not become ready before its deadline."""


class ProbeError(EndpointError):
    """The pre-flight request was rejected, or would truncate under --strict."""

    engine_error: Any = None
    """The engine's parsed answer (evalgate.engine.wire.EngineError) when it rejected the
    request."""


class RequestFailed(EndpointError):
    """A request that got no usable answer in all its attempts: `fatal` when retrying cannot
    help (a 4xx). `error` is the engine's answer (evalgate.engine.wire.EngineError), or what
    went wrong on the way (status 0)."""

    def __init__(
        self,
        error: Any,
        *,
        fatal: bool,
        attempts: int,
        unreachable_workers: tuple[str, ...] = (),
        url: str = "",
        timeout: float = 0.0,
    ) -> None:
        # status 0: no status came back, so the message says what went wrong on the way
        super().__init__(error.describe() if error.status else f"no answer: {error.message}")
        self.error = error
        self.fatal = fatal
        self.attempts = attempts
        self.unreachable_workers = unreachable_workers
        """Workers the router said it could not reach, in any answer of this eval so far."""
        self.url = url
        """Where it was sent (without credentials)."""
        self.timeout = timeout
        """The deadline of each attempt, in seconds."""


class EngineAnswerError(EndpointError):
    """An error answer from an engine, parsed (`error`: evalgate.engine.wire.EngineError)."""

    def __init__(self, error: Any) -> None:
        super().__init__(error.describe())
        self.error = error


class TransientAnswer(EndpointError):
    """An answer that may be right next time: a 200 whose body is not what was asked for, or
    no whole answer within the deadline."""


class TimedOut(TransientAnswer):
    """No whole answer within the request's deadline (first byte to last)."""


class MalformedAnswer(TransientAnswer):
    """A 200 whose body is not a completion."""


class AnswerTooLarge(EndpointError):
    """The answer passed --max-response-bytes, decoded: it was cut, and is not retried."""


class ConnectionFailed(EndpointError):
    """No answer came back: the connection was refused, reset or closed before the answer."""

    @classmethod
    def of(cls, exc: BaseException) -> ConnectionFailed:
        """From the HTTP library's error, named by its first cause (the socket's own error)."""
        root = exc
        while root.__cause__ is not None and root.__cause__ is not root:
            root = root.__cause__
        named = root
        if isinstance(root, OSError) and root.errno and type(root).__module__ != "builtins":
            # the library's own OSError (aiohttp's ClientOSError): the socket's error by errno
            named = OSError(root.errno, root.strerror)  # ConnectionResetError, ...
        text = str(named) or "the connection was closed before an answer"
        return cls(f"{type(named).__name__}: {text}")


class HostSilent(ConnectionFailed):
    """The host stopped answering: no connection within the connect deadline, or the kernel
    dropped a connection whose peer acknowledged nothing for TCP_USER_TIMEOUT."""


class EvalFailedError(EvalgateError):
    exit_code = ExitCode.EVAL


class OverBudget(EvalFailedError):
    """More requests failed than --max-failed-requests allows: raised by the first failure
    over it (`doc_id`, `failure`); the eval's message waits for the final count."""

    def __init__(self, doc_id: int, failure: RequestFailed) -> None:
        super().__init__(f"question {doc_id} failed over the budget: {failure.message}")
        self.doc_id = doc_id
        self.failure = failure


class WorkerLost(EvalFailedError):
    """A worker behind the router stopped answering during the eval."""


class AbortedError(EvalgateError):
    exit_code = ExitCode.ABORTED


def interrupt_within(exc: BaseException) -> KeyboardInterrupt | None:
    """The stop signal (Ctrl-C, or one raised as it) inside an exception Python or a library
    made of it on its way: Python 3.11 raises RuntimeError("Error calling __set_name__ ...")
    from an interrupt that lands while a class is built, as it is in an import."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None
