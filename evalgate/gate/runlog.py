"""The result document: the typed values the stages return, kept as they arrive, and the one
function that turns them into a ``Result``, also for a run that stopped early.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import msgspec
from msgspec import structs

from evalgate._version import __version__
from evalgate.evidence.model import (
    RESULT_SCHEMA,
    ContextRecord,
    EndpointRecord,
    ErrorRecord,
    EvalRecord,
    Labels,
    ProbeRecord,
    Result,
    Score,
    Stage,
    Status,
    ThresholdRecord,
)

if TYPE_CHECKING:
    from evalgate.context.budget import EvalContext
    from evalgate.gate.verdict import Verdict
    from evalgate.settings.values import Settings


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def context_record(context: EvalContext) -> ContextRecord:
    """The context as the result (and `evalgate context --json`) records it."""
    return msgspec.convert(context, ContextRecord, from_attributes=True)


def labels(settings: Settings, topology: dict[str, Any] | None = None) -> Labels:
    """The benchmark config a result belongs to (its labels, ISL/OSL, the concurrency and the
    job's topology), so that `evalgate verify` can resolve thresholds and expected sets."""
    named = msgspec.convert(settings.labels, Labels, from_attributes=True)  # the job's labels
    return structs.replace(
        named,
        isl=settings.context.isl,
        osl=settings.context.osl,
        concurrency=settings.eval.num_concurrent,
        topology=topology,
    )


@dataclass
class RunLog:
    """What a run has established so far: the stage it is in, and each stage's typed value."""

    model: str | None
    labels: Labels
    """The config the run belongs to, so `evalgate verify` can resolve thresholds and sets."""
    task: str
    """The task asked for, part of the config too: recorded before the eval, so a run that
    stops early is not taken for another task's (a task file: its path until it is read)."""
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    started_at: str = field(default_factory=_now)
    stage: Stage = "settings"
    timings: dict[str, float] = field(default_factory=dict)
    endpoint: EndpointRecord | None = None
    context: ContextRecord | None = None
    probe: ProbeRecord | None = None
    eval: EvalRecord | None = None
    scores: tuple[Score, ...] = ()
    threshold: ThresholdRecord | None = None
    verdict: Verdict | None = None
    warnings: list[str] = field(default_factory=list)
    files: dict[str, str | None] = field(default_factory=dict)
    checkpoint: Callable[[], None] | None = None
    _started: float = field(default_factory=time.monotonic)
    _stage_started: float = field(default_factory=time.monotonic)

    def enter(self, stage: Stage) -> None:
        """Mark the start of a stage (and time the one before); then `checkpoint`, which the run
        sets to rewrite its "running" result, so a run killed outright says how far it got."""
        self._close_stage()
        self.stage = stage
        self._stage_started = time.monotonic()
        if self.checkpoint is not None:
            self.checkpoint()

    def _close_stage(self) -> None:
        if self.stage not in ("settings", "done"):
            self.timings[self.stage] = round(time.monotonic() - self._stage_started, 3)


def build_result(
    log: RunLog,
    *,
    status: Status,
    reason: str,
    exit_code: int,
    error: BaseException | None = None,
) -> Result:
    """The result.json of the run as it stands: the one place a Result is put together, the
    log's values under the result's names as they stand, copied where the log goes on growing."""
    log._close_stage()
    given = {name: value for name, value in vars(log).items() if name in Result.__struct_fields__}
    given.update(
        timings={**log.timings, "total": round(time.monotonic() - log._started, 3)},
        scores=list(log.scores),
        checks=list(log.verdict.checks) if log.verdict else [],
        verdict=log.verdict.record() if log.verdict else None,
        warnings=list(log.warnings),
        files=dict(log.files),
    )
    return Result(
        schema=RESULT_SCHEMA,
        evalgate_version=__version__,
        status=status,
        reason=reason,
        error=(
            ErrorRecord(type=type(error).__name__, message=str(getattr(error, "message", error)))
            if error is not None
            else None
        ),
        exit_code=exit_code,
        finished_at=None if status == "running" else _now(),
        **given,
    )
