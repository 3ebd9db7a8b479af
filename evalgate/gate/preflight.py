"""Before the eval: the endpoint waited for, the context derived, the probe sent. Shared by
`context`, `probe` and `run`, so the three never disagree about a number; what they establish
(Checked) serves the hook's next concurrency with no second probe (Dynamo's part: docs/run.md (3)).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from evalgate.engine import dynamo, served
from evalgate.engine.served import survey
from evalgate.errors import ProbeError, UsageError
from evalgate.evidence.fields import Stage
from evalgate.evidence.stage_records import (
    EndpointRecord,
    EngineRecord,
    ProbeRecord,
)
from evalgate.gate.context import EvalContext
from evalgate.gate.limits import gather_context
from evalgate.gate.record import RunLog, context_record
from evalgate.settings.context import ContextSettings
from evalgate.settings.endpoint import EndpointSettings
from evalgate.tasks.prompts import Prompt, longest_candidates

if TYPE_CHECKING:
    from evalgate.tasks.spec import TaskSpec

PROBE_TIMEOUT = 60.0
"""Seconds the probe may take to its first event, first byte to last (capped by --timeout)."""


def derive(
    ask: ContextSettings,
    endpoint: EndpointSettings,
    prompts: Sequence[Prompt],
    on_stage: Callable[[Stage], None] = lambda stage: None,
) -> tuple[EvalContext, Prompt, EngineRecord | None]:
    """Readiness (when there is an endpoint), what the engines serve, then the context and the
    prompt to probe with."""
    candidates = longest_candidates(prompts)
    found = survey(endpoint, candidates, on_stage)
    context, longest = gather_context(ask, found, candidates)
    return context, longest, found.engine


def probe(
    endpoint: EndpointSettings,
    context: EvalContext,
    prompt: Prompt,
    stop: list[str],
    sampling: Mapping[str, Any] | None = None,
    *,
    strict: bool = False,
) -> ProbeRecord:
    """The pre-flight request at the real budget, with the task's stops and sampling, sent by
    the eval's own client."""
    from evalgate.engine.client import send_probe, worker_words
    from evalgate.errors import RequestFailed
    from evalgate.gate.probe import accepted, failed

    timeout = min(endpoint.network.timeout, PROBE_TIMEOUT)
    client = eval_client(endpoint, timeout=timeout, max_connections=1)
    body = eval_body(endpoint, prompt, context.max_tokens, stop, sampling)
    started = time.monotonic()
    try:
        send_probe(body, **client)
    except RequestFailed as exc:
        rejected = failed(exc, context)
        if rejected.engine_error is None or not dynamo.wordless(rejected.engine_error):
            raise rejected from exc
        raise worker_words(rejected, endpoint.worker_urls, body, client) from exc
    return accepted(context, prompt, time.monotonic() - started, strict=strict)


def eval_body(
    endpoint: EndpointSettings,
    prompt: Prompt,
    max_tokens: int,
    stop: Sequence[str],
    sampling: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The body the eval sends for one of evalgate's prompts: the probe's too."""
    from evalgate.engine.request import generation_body

    return generation_body(
        api=endpoint.api,
        model=str(endpoint.served_model),
        max_tokens=max_tokens,
        stop=stop,
        sampling=sampling,
        messages=prompt.messages,
        prompt=prompt.text,
    )


def eval_client(
    endpoint: EndpointSettings, *, timeout: float, max_connections: int
) -> dict[str, Any]:
    """The keyword arguments of the EvalClient that sends the probe and the eval."""
    if endpoint.base_url is None or endpoint.served_model is None:  # run and probe need both
        raise UsageError(
            "Missing --base-url or --model: set the flag or its variable (see --help)."
        )
    return {
        "base_url": endpoint.base_url,
        "api_key": endpoint.key,
        "api": endpoint.api,
        "timeout": timeout,
        "attempts": endpoint.network.max_attempts,
        "wait_min": endpoint.network.retry_wait_min,
        "wait_max": endpoint.network.retry_wait_max,
        "max_connections": max_connections,
        "network": endpoint.network,
    }


@dataclass(frozen=True)
class Checked:
    """What readiness, context and probe established; valid while the same engine serves."""

    context: EvalContext
    endpoint: EndpointRecord | None
    probe: ProbeRecord


def reuse(run: RunLog, prior: Checked) -> None:
    """Another concurrency against the same live engine: no second probe."""
    run.endpoint = prior.endpoint
    run.context = context_record(prior.context)
    run.probe = prior.probe
    run.warnings += prior.context.warnings


def check(
    run: RunLog,
    endpoint: EndpointSettings,
    ask: ContextSettings,
    spec: TaskSpec,
    prompts: Sequence[Prompt],
    *,
    sampling: Mapping[str, Any],
) -> Checked:
    """Readiness, context and probe, recorded in `run` as each is established."""
    run.endpoint = served.record(endpoint)  # where the engine was, also if it is never ready
    candidates = longest_candidates(prompts)
    found = survey(endpoint, candidates, run.enter)
    run.endpoint = served.record(endpoint, found.engine)  # and what it said it is
    context, longest = gather_context(ask, found, candidates)
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
        run.probe = probe(endpoint, context, longest, spec.stop, sampling, strict=ask.strict)
    except ProbeError as exc:
        if exc.engine_error is not None:
            said = exc.engine_error
            run.probe = msgspec.structs.replace(
                planned, status_code=said.status, engine_message=said.message
            )
        raise
    return Checked(context, run.endpoint, run.probe)
