"""Readiness, context and probe in a gate run, each recorded in the run's log as it is
established; what they establish (Checked) serves the next concurrency against the same live
engine without a second probe."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from msgspec.structs import replace

from evalgate.errors import ProbeError
from evalgate.evidence.stage_records import ContextRecord, EndpointRecord, ProbeRecord
from evalgate.gate import preflight
from evalgate.gate.context import EvalContext
from evalgate.gate.record import RunLog, context_record, endpoint_record
from evalgate.settings.stages import ContextAsk, Endpoint
from evalgate.tasks.prompts import Prompt
from evalgate.tasks.spec import TaskSpec


@dataclass(frozen=True)
class Checked:
    """What readiness, context and probe established; valid while the same engine serves."""

    context: EvalContext
    endpoint: EndpointRecord | None
    context_record: ContextRecord
    probe: ProbeRecord


def reuse(run: RunLog, prior: Checked) -> EvalContext:
    """Another concurrency against the same live engine: no second probe."""
    run.endpoint = prior.endpoint
    run.context = prior.context_record
    run.probe = prior.probe
    run.warnings += prior.context.warnings
    return prior.context


def check(
    run: RunLog,
    endpoint: Endpoint,
    ask: ContextAsk,
    spec: TaskSpec,
    prompts: Sequence[Prompt],
    *,
    sampling: Mapping[str, Any],
) -> Checked:
    """Readiness, context and probe, recorded in `run` as each is established."""
    run.endpoint = endpoint_record(endpoint)
    context, longest, engine = preflight.derive(ask, endpoint, prompts, run.enter)
    run.endpoint = endpoint_record(endpoint, engine)
    run.context = context_record(context)
    run.warnings += context.warnings

    run.enter("probe")
    planned = run.probe = ProbeRecord(
        outcome="rejected",
        max_tokens=context.max_tokens,
        prompt_tokens=context.prompt_tokens.value if context.prompt_tokens else None,
        doc_id=longest.doc_id,
    )
    try:
        run.probe = preflight.probe(endpoint, context, longest, spec.stop, sampling)
    except ProbeError as exc:
        if exc.engine_error is not None:
            said = exc.engine_error
            run.probe = replace(planned, status_code=said.status, engine_message=said.message)
        raise
    return Checked(context, run.endpoint, run.context, run.probe)
