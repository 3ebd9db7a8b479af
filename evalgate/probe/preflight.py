"""Before the eval: the endpoint waited for, the context derived, the probe sent, one request
exactly as the eval will send it, so a budget the engine rejects fails in seconds, not after the
eval's retries (docs/run.md, 3); what its answer means, and the fix to suggest. Shared by
`context`, `probe` and `run`, so the three never disagree about a number; what they establish
(Checked) serves the hook's next concurrency with no second probe.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from evalgate.context.budget import EvalContext
from evalgate.context.limits import gather_context
from evalgate.engine import answers, served
from evalgate.engine.served import survey
from evalgate.engine.urls import api_root
from evalgate.engine.wire import EngineError, credentials_advice
from evalgate.errors import (
    ConnectionFailed,
    EngineAnswerError,
    ProbeError,
    RequestFailed,
    TimedOut,
    UsageError,
)
from evalgate.evidence.model import EndpointRecord, EngineRecord, ProbeRecord
from evalgate.gate.runlog import RunLog, context_record
from evalgate.settings.context import ContextSettings
from evalgate.settings.endpoint import EndpointSettings
from evalgate.tasks.spec import Prompt, TaskSpec, longest_candidates

log = logging.getLogger(__name__)
_ENGINE_LIMIT = re.compile(
    r"(?:max_model_len=|maximum context length (?:is|of) |context length \()([0-9]+)"
)


def suggest_fix(error: EngineError, context: EvalContext) -> str:
    """A concrete change, from the engine's limit in its message and what evalgate derived."""
    match = _ENGINE_LIMIT.search(error.message)
    engine_limit = int(match.group(1)) if match else None
    served = context.served_min
    prompt = context.prompt_tokens.value if context.prompt_tokens else None
    if engine_limit is not None and (served is None or engine_limit < served.value):
        believed = f"{served.value} ({served.source})" if served else "unknown"
        return (
            f"The engine enforces {engine_limit} tokens, but evalgate was told the served limit "
            f"is {believed}: a worker behind the router (often the decode) serves less. Pass "
            f"each worker with --worker-url, its server arguments with --server-config, or "
            f"--served-max-model-len {engine_limit}."
        )
    if context.budget_policy == "forced":
        fit = context.eval_max_model_len - (prompt or 0)
        return (
            f"Drop --max-tokens {context.max_tokens} to let evalgate derive the budget "
            f"(about {fit} here), or serve a --max-model-len of at least "
            f"{context.max_tokens + (prompt or 0)}."
        )
    return (
        "Serve a larger --max-model-len, or lower the budget with --max-tokens; "
        "--explain on `evalgate context` shows each number and its source."
    )


def _numbers(context: EvalContext) -> str:
    served = ", ".join(f"{s.value} ({s.source})" for s in context.served) or "none known"
    prompt = (
        f"{context.prompt_tokens.value} tokens ({context.prompt_tokens.source})"
        if context.prompt_tokens
        else "not measured"
    )
    return (
        f"evalgate derived: served limits {served}; EVAL_MAX_MODEL_LEN "
        f"{context.eval_max_model_len}; max_tokens {context.max_tokens} "
        f"({context.budget_policy}); longest prompt {prompt}"
    )


def _attempts(failed: RequestFailed) -> str:
    return f"{failed.attempts} attempt{'s' if failed.attempts != 1 else ''}"


def failed(failed: RequestFailed, context: EvalContext) -> ProbeError:
    """The ProbeError for a probe that got no acceptance, by what stopped it."""
    error, cause = failed.error, failed.__cause__
    endpoint, timeout = api_root(failed.url), failed.timeout
    if isinstance(cause, ConnectionFailed | TimedOut):
        seen = f"no first token within {timeout:g} s" if isinstance(cause, TimedOut) else cause
        return ProbeError(
            f"The pre-flight request could not reach the engine after {_attempts(failed)} "
            f"({seen}). Check the endpoint; it answered /v1/models a moment ago."
        )
    if not isinstance(cause, EngineAnswerError):
        return ProbeError(
            f"The engine's answer to the pre-flight request is not an OpenAI-compatible stream "
            f"({type(cause).__name__}: {cause}). Check that --base-url points at the engine or "
            "router's /v1, and --api matches what it serves."
        )
    if error.status == 200:
        said = (
            f"The engine answered the pre-flight request with an error instead of a stream, "
            f"after {_attempts(failed)} ({error.describe()}). {_numbers(context)}. "
            f"{suggest_fix(error, context)}"
        )
    elif refused := credentials_advice(error):
        # no length or budget changes who may ask: the numbers would only mislead
        said = f"The engine rejected the pre-flight request ({error.describe()}). {refused}"
    elif not failed.fatal:
        # still busy or gone after every attempt: no verdict on the body
        said = (
            f"The engine did not answer the pre-flight request after {_attempts(failed)} "
            f"({error.describe()}). Check that the engines behind {endpoint} are up and "
            "healthy; it answered /v1/models a moment ago."
        )
    elif (gone := answers.worker_gone(error)) is not None:
        said = (
            f"{gone}: no worker serves the model now. Check the workers "
            f"behind {endpoint} (their logs say why they stopped); it listed the model a moment "
            "ago."
        )
    else:
        said = (
            f"The engine rejected the pre-flight request ({error.describe()}). "
            f"{_numbers(context)}. {suggest_fix(error, context)}"
        )
    problem = ProbeError(said)
    problem.engine_error = error
    return problem


def accepted(context: EvalContext, prompt: Prompt, latency: float, *, strict: bool) -> ProbeRecord:
    """The record of a probe the engine accepted; ProbeError for a truncation risk under
    `strict`."""
    if context.truncation_risk:  # accepted, but prompt + budget exceeds what is served
        if strict:
            raise ProbeError(
                "The engine accepted the probe, but the longest prompt plus max_tokens exceeds "
                f"the served limit, so long answers would be cut silently. {_numbers(context)}. "
                "Lower --max-tokens, or run without --strict to accept it as a warning."
            )
        log.warning("probe accepted, but answers may be truncated: %s", _numbers(context))
    log.info("probe accepted in %.2f s (max_tokens %d)", latency, context.max_tokens)
    return ProbeRecord(
        outcome="truncation_risk" if context.truncation_risk else "ok",
        status_code=200,
        latency_s=round(latency, 3),
        prompt_tokens=context.prompt_tokens.value if context.prompt_tokens else None,
        max_tokens=context.max_tokens,
        doc_id=prompt.doc_id,
    )


# The steps, in order (Dynamo's part: docs/run.md (3)).

PROBE_TIMEOUT = 60.0
"""Seconds the probe may take to its first event, first byte to last (capped by --timeout)."""


def derive(
    ask: ContextSettings, endpoint: EndpointSettings, prompts: Sequence[Prompt]
) -> tuple[EvalContext, Prompt, EngineRecord | None]:
    """Readiness (when there is an endpoint), what the engines serve, then the context and the
    prompt to probe with."""
    candidates = longest_candidates(prompts)
    found = survey(endpoint, candidates)
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

    timeout = min(endpoint.network.timeout, PROBE_TIMEOUT)
    client = eval_client(endpoint, timeout=timeout, max_connections=1)
    body = eval_body(endpoint, prompt, context.max_tokens, stop, sampling)
    started = time.monotonic()
    try:
        send_probe(body, **client)
    except RequestFailed as exc:
        rejected = failed(exc, context)
        if rejected.engine_error is None or not answers.wordless(rejected.engine_error):
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
    from evalgate.engine.client import generation_body

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
