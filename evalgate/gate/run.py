"""One gate run, stage by stage: thresholds, data, readiness, context, probe, eval, verdict.

Each stage returns a typed value that the run's log keeps (gate.record.RunLog); whatever
happens, gate.record.build_result turns the log into the result, and result.json is written
last, atomically, with the stage reached and why it stopped. Errors are recorded and returned,
never printed: the CLI decides what to show.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from evalgate import scrub
from evalgate.errors import AbortedError, EvalFailedError, EvalgateError, ExitCode, ProbeError
from evalgate.evidence import artifacts, folder, journal
from evalgate.evidence.model import (
    Api,
    ContextRecord,
    DatasetRecord,
    EndpointRecord,
    EvalRecord,
    ProbeRecord,
    Protocol,
    RequestCounts,
    Result,
    Sample,
    Status,
    ThresholdRecord,
)
from evalgate.gate import early_stop, preflight
from evalgate.gate.context import EvalContext
from evalgate.gate.record import RunLog, build_result, context_record, endpoint_record
from evalgate.gate.speculation import check_acceptance, simulated_sources
from evalgate.gate.thinking import InlineThinking
from evalgate.rules.verdict import Verdict, decide
from evalgate.settings import Settings, stages
from evalgate.settings.environment import credentials
from evalgate.tasks.dataset import Dataset, full_size, reference_answer
from evalgate.tasks.prompts import Prompt, build_prompts
from evalgate.tasks.spec import BUILT_IN, FEWSHOT_SEED, TaskSpec, load_data, load_task
from evalgate.thresholds import Floor, load_thresholds, resolve_floor

if TYPE_CHECKING:  # lm-eval loads only when an eval starts, after the probe
    from evalgate.compare.runs import Run
    from evalgate.gate.dispatch import Dispatch, Progress
    from evalgate.gate.evaluate import Evaluation

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Checked:
    """What readiness, context and probe established; valid while the same engine serves."""

    context: EvalContext
    endpoint: EndpointRecord | None
    context_record: ContextRecord
    probe: ProbeRecord


@dataclass(frozen=True)
class RunOutcome:
    """What a run decided, where its evidence is, and the error that stopped it (if any)."""

    exit_code: int
    status: Status
    reason: str
    result_path: Path | None
    result: Result
    error: EvalgateError | None
    checked: Checked | None = None
    """The endpoint, context and probe this run established, for reuse by the next run."""
    comparison: str | None = None
    """With --baseline: the comparison report, as text."""


def protocol(
    spec: TaskSpec, dataset: Dataset, *, api: Api, limit: int | None, max_tokens: int
) -> Protocol:
    """The run's protocol: the resume fingerprint, the comparison check and the record."""
    return Protocol(
        task=spec.name,
        task_version=spec.version,
        task_sha256=spec.sha256,
        api=api,
        num_fewshot=spec.num_fewshot,
        fewshot_seed=FEWSHOT_SEED,
        max_tokens=max_tokens,
        temperature=0.0,
        limit=limit,
        dataset=DatasetRecord(**dataset.describe()),
    )


class GateRun:
    """The stages of one `evalgate run`, sharing what each establishes."""

    def __init__(
        self,
        settings: Settings,
        *,
        progress: Progress | None,
        resume: bool,
        prior: Checked | None,
        topology: dict[str, Any] | None,
    ) -> None:
        self.settings = settings
        self.endpoint = stages.endpoint(settings)
        self.prior = prior
        self.checked: Checked | None = None
        self.dataset: Dataset | None = None
        self.dispatch: Dispatch | None = None
        self.progress = progress
        self.resume = resume
        self.log = RunLog(settings.model, stages.labels(settings, topology))
        self.out = settings.output_dir
        self.lock: folder.FolderLock | None = None
        """Held from before the folder's first check to after its last write."""
        self.prepared = False
        self.comparison: str | None = None

    def _running(self) -> None:
        """result.json as "running" at the stage reached: what a run killed outright leaves."""
        if self.log.stage == "done":  # the verdict is written next
            return
        running = build_result(self.log, status="running", reason="in progress", exit_code=4)
        artifacts.write_result(self.out, running)

    def execute(self) -> tuple[Status, str, int]:
        s = self.settings
        run = self.log
        if s.baseline is not None:  # before anything is written: never over the baseline
            from evalgate.compare.baseline import refuse_overlap

            refuse_overlap(s.baseline, self.out)
        self.lock = folder.prepare(self.out, overwrite=s.overwrite, resume=self.resume)
        if self.lock.warning is not None:
            run.warnings.append(self.lock.warning)
        self.prepared = True
        # From here on the folder holds this run: an earlier run's files must not outlive it,
        # and a run killed outright (SIGKILL) is seen as "running", never as the old verdict.
        folder.clear_stale(self.out)
        run.checkpoint = self._running
        self._running()
        stages.require(s, "base_url", "model")
        simulated = check_acceptance(
            simulated_sources(s.sglang_simulate_acc_len, s.server_args()),
            allowed=s.allow_simulated_acceptance,
        )
        run.warnings += [simulated] if simulated else []
        baseline = self._baseline()

        spec = load_task(s.api, s.task)
        run.enter("thresholds")
        key = s.task if s.task in BUILT_IN else spec.name
        floor = resolve_floor(load_thresholds(s.thresholds), s.model, run_labels(run), key)
        run.threshold = ThresholdRecord(value=floor.value, matched=floor.matched, file=floor.file)

        run.enter("dataset")
        dataset = self.dataset = load_data(s.task, s.dataset_dir, hub=s.dataset_hub, spec=spec)
        prompts = build_prompts(spec, dataset.test, dataset.train, s.limit)
        if baseline is not None and s.baseline is not None:  # found before the eval, not after
            from evalgate.compare.baseline import check_baseline

            # The budget is known after the probe: it is compared with the rest after the eval.
            planned = protocol(
                spec, dataset, api=s.api, limit=s.limit, max_tokens=baseline.eval.max_tokens
            )
            check_baseline(baseline, s.baseline, planned)

        context = self._reuse(self.prior) if self.prior is not None else self._check(spec, prompts)
        run.enter("eval")
        evaluation = self._eval(spec, dataset, prompts, context.max_tokens, floor.value)
        run.enter("gate")
        verdict = self._gate(spec, evaluation, floor, baseline)
        if not verdict.problems:
            run.enter("done")
        return verdict.outcome, verdict.reason, int(verdict.exit_code)

    def _baseline(self) -> Run | None:
        """--baseline, read before anything runs: a missing or broken one fails in a second."""
        if self.settings.baseline is None:
            return None
        from evalgate.compare.runs import load_run

        return load_run(self.settings.baseline)

    def _reuse(self, prior: Checked) -> EvalContext:
        """Another concurrency against the same live engine: no second probe."""
        run = self.log
        run.endpoint = prior.endpoint
        run.context = prior.context_record
        run.probe = prior.probe
        run.warnings += prior.context.warnings
        return prior.context

    def _check(self, spec: TaskSpec, prompts: list[Prompt]) -> EvalContext:
        """Readiness, context and probe."""
        s = self.settings
        run = self.log
        run.endpoint = endpoint_record(self.endpoint)
        ask = stages.context_ask(s)
        context, longest, engine = preflight.derive(ask, self.endpoint, prompts, run.enter)
        if engine is not None:
            run.endpoint = endpoint_record(self.endpoint, engine.owned_by, engine.version)
        run.context = context_record(context)
        run.warnings += context.warnings

        run.enter("probe")
        planned = ProbeRecord(
            outcome="rejected",
            max_tokens=context.max_tokens,
            prompt_tokens=context.prompt_tokens.value if context.prompt_tokens else None,
            doc_id=longest.doc_id,
        )
        run.probe = planned
        try:
            seen = preflight.probe(
                self.endpoint, context, longest, spec.stop, spec.sampling | s.request_fields()
            )
        except ProbeError as exc:
            if exc.engine_error is not None:
                run.probe = ProbeRecord(
                    outcome="rejected",
                    status_code=exc.engine_error.status,
                    engine_message=exc.engine_error.message,
                    max_tokens=planned.max_tokens,
                    prompt_tokens=planned.prompt_tokens,
                    doc_id=planned.doc_id,
                )
            raise
        run.probe = ProbeRecord(
            outcome=seen.outcome,  # type: ignore[arg-type]  # ok or truncation_risk
            status_code=200,
            latency_s=round(seen.latency_s, 3),
            prompt_tokens=seen.prompt_tokens,
            max_tokens=seen.max_tokens,
            doc_id=seen.doc_id,
        )
        self.checked = Checked(context, run.endpoint, run.context, run.probe)
        return context

    def _eval(
        self,
        spec: TaskSpec,
        dataset: Dataset,
        prompts: list[Prompt],
        max_tokens: int,
        threshold: float,
    ) -> Evaluation:
        from evalgate.engine import request
        from evalgate.engine.client import EvalClient
        from evalgate.engine.workers import WorkerWatch
        from evalgate.gate.dispatch import Dispatch, Request

        s = self.settings
        run = self.log
        questions = len(prompts)
        agreed = protocol(spec, dataset, api=s.api, limit=s.limit, max_tokens=max_tokens)
        engine = run.endpoint.engine if run.endpoint else None
        fingerprint = journal.fingerprint(
            agreed,
            model=s.model,
            engine_version=engine.version if engine else None,
            served=run.context.served if run.context else None,
            questions=questions,
        )
        journal_path = self.out / artifacts.JOURNAL_NAME
        kept = journal.read_journal(journal_path, fingerprint) if self.resume else {}
        if kept:
            log.info("resuming: %d answers from %s are reused", len(kept), journal_path)
        answers = journal.Journal(journal_path, fingerprint, kept)
        endpoint = self.endpoint
        model = str(endpoint.model)
        sampling = spec.sampling | s.request_fields()

        def client() -> EvalClient:
            options = preflight.eval_client(
                endpoint, timeout=endpoint.timeout, max_connections=s.num_concurrent
            )
            watch = WorkerWatch(
                endpoint.worker_urls,
                endpoint.api_key,
                network=options["network"],
                deadline=endpoint.discovery_timeout,
            )
            return EvalClient(**options, watch=watch)

        sent = self.dispatch = Dispatch(
            client_factory=client,
            model=model,
            api=s.api,
            max_tokens=max_tokens,
            num_concurrent=s.num_concurrent,
            max_failed=s.max_failed_requests,
            journal=answers,
            resumed=kept,
            progress=self.progress,
            thinking=InlineThinking(s.think_start_marker, s.think_end_marker),
        )
        test = early_stop.test(s.early_stop, s.alpha, spec, threshold)
        if test is None:  # the answers flow while lm-eval loads and builds its contexts
            bodies = (
                request.prompt_body(
                    p,
                    api=s.api,
                    model=model,
                    max_tokens=max_tokens,
                    stop=spec.stop,
                    sampling=sampling,
                )
                for p in prompts
            )
            sent.start(
                [Request.of(p.doc_id, body) for p, body in zip(prompts, bodies, strict=True)]
            )
        recorded = run.eval = EvalRecord(
            **msgspec.structs.asdict(agreed),
            num_concurrent=s.num_concurrent,
            chat_template_kwargs=s.chat_template_kwargs,
            reasoning_effort=s.reasoning_effort,
            questions=questions,
            requests=RequestCounts.zero(),
        )
        try:
            from evalgate.gate.evaluate import lm_eval_version, run_eval
            from evalgate.gate.lm import GateLM

            recorded = run.eval = msgspec.structs.replace(
                recorded, lm_eval_version=lm_eval_version()
            )
            lm = GateLM(
                dispatch=sent,
                sampling=sampling,
                sequential=test,
                scorer=early_stop.scorer(spec) if test is not None else None,
            )
            evaluation = run_eval(spec, dataset, lm, s.limit)
        finally:
            sent.halt()  # before the journal closes: nothing is in flight any more
            answers.close()
            run.eval = _with_counts(recorded, sent.tally.recorded())
            run.warnings += sent.warnings
        stopped = False
        if test is not None:
            evaluation, record = early_stop.settle(evaluation, sent, test)
            run.eval = msgspec.structs.replace(run.eval, early_stop=record)
            stopped = record.stopped
        run.scores = evaluation.scores
        artifacts.write_samples(self.out, evaluation.samples)
        if not stopped:  # lm-eval's own scores count the questions never asked as wrong
            artifacts.write_json(self.out / artifacts.RAW_NAME, evaluation.raw)
        run.files = {
            "samples": artifacts.SAMPLES_NAME,
            "lm_eval_results": None if stopped else artifacts.RAW_NAME,
            "journal": artifacts.JOURNAL_NAME,
        }
        return evaluation

    def _gate(
        self, spec: TaskSpec, evaluation: Evaluation, floor: Floor, baseline: Run | None
    ) -> Verdict:
        """The gate rule on the scores, with the run-level problems beside them."""
        s = self.settings
        run = self.log
        counts = run.eval.requests if run.eval else RequestCounts.zero()
        if counts.failed:
            run.warnings.append(
                f"{counts.failed} request(s) failed and were scored as wrong "
                f"(allowed by --max-failed-requests {s.max_failed_requests})"
            )
        problems: list[str] = []
        doubts: list[str] = []
        stopped = run.eval.early_stop if run.eval and run.eval.early_stop else None
        answered = counts.completed if stopped is not None and stopped.stopped else counts.total
        truncated_rate = (counts.truncated + counts.empty) / max(answered, 1)
        if counts.truncated or counts.empty:
            run.warnings.append(
                f"{counts.truncated} answer(s) ended by length and {counts.empty} "
                f"came back empty ({truncated_rate:.1%} of {answered})"
            )
        run.warnings += self.dispatch.notes() if self.dispatch is not None else []
        if counts.cut_while_thinking:
            run.warnings.append(thinking_warning(counts, run.eval.max_tokens if run.eval else 0))
        if truncated_rate > s.max_truncated_rate:
            problems.append(
                f"{truncated_rate:.1%} of answers were truncated or empty, over "
                f"--max-truncated-rate {s.max_truncated_rate:.1%}"
            )
        if baseline is not None:
            regressed, finding = self._compare(baseline, evaluation.samples)
            if finding:
                (problems if regressed else doubts).append(finding)
        verdict = run.verdict = decide(
            run.scores,
            floor.value,
            min_samples=s.min_samples if s.min_samples is not None else full_size(spec.name),
            matched=floor.matched,
            problems=problems,
            doubts=doubts,
            early_stop=stopped,
        )
        return verdict

    def _compare(self, baseline: Run, samples: list[Sample]) -> tuple[bool, str]:
        """Pair this run with --baseline: (regressed, finding), the finding '' when equivalent."""
        from evalgate.compare.comparison import compare
        from evalgate.compare.report import comparison_document, render_text
        from evalgate.compare.runs import evaluated_run

        run = self.log
        provisional = build_result(run, status="running", reason="comparing", exit_code=0)
        candidate = evaluated_run(self.out / artifacts.RESULT_NAME, provisional, samples)
        try:
            comparison = compare(baseline, candidate, max_drop=self.settings.max_drop)
        except EvalgateError as exc:
            raise type(exc)(
                f"comparison with {self.settings.baseline} refused: {exc.message}"
            ) from exc
        artifacts.write_json(self.out / artifacts.COMPARISON_NAME, comparison_document(comparison))
        run.files["comparison"] = artifacts.COMPARISON_NAME
        self.comparison = render_text(comparison)
        if comparison.exit_code == ExitCode.FAIL:
            return True, f"regression against the baseline {self.settings.baseline}: " + (
                comparison.reason
            )
        if comparison.exit_code == ExitCode.INCONCLUSIVE:
            return False, f"the comparison with the baseline is inconclusive: {comparison.reason}"
        return False, ""

    def partial_samples(self) -> None:
        """On an error or abort mid-eval: the answers received so far, as samples.jsonl."""
        if self.dispatch is None or not self.dispatch.tally.answers:
            return
        test = self.dataset.test if self.dataset else []

        def doc(doc_id: int) -> dict[str, str]:
            return test[doc_id] if doc_id < len(test) else {"question": "", "answer": ""}

        records = [
            Sample.of(
                reply,
                question=doc(doc_id)["question"],
                target=reference_answer(doc(doc_id)["answer"]),
            )  # no filters: the eval did not finish, so nothing was scored
            for doc_id, reply in sorted(self.dispatch.tally.answers.items())
        ]
        artifacts.write_samples(self.out, records)
        self.log.files.setdefault("samples", artifacts.SAMPLES_NAME)
        self.log.files.setdefault("journal", artifacts.JOURNAL_NAME)


def thinking_warning(counts: RequestCounts, budget: int) -> str:
    """How many answers the budget cut while the model was still thinking, and the budget to
    try instead (they needed more than the whole budget: the next step is twice it)."""
    cut = counts.cut_while_thinking
    how = "no content, finish_reason length; scored from their reasoning"
    if counts.inline_thinking:  # thinking written into the answer: cut there, no answer
        how = (
            "thinking written into the answer, finish_reason length before its end marker; "
            "scored as no answer"
            if not counts.from_reasoning
            else "finish_reason length before their thinking ended; scored from their "
            "reasoning field, or as no answer where the thinking was written into the answer"
        )
    return (
        f"{cut} answer(s) ran out of the {budget}-token budget while still thinking "
        f"({cut / max(counts.total, 1):.1%} of {counts.total}: {how}): holding them takes a "
        "budget above "
        f"{budget} tokens, e.g. --max-tokens {2 * budget} with a context that fits it, or less "
        "thinking (--reasoning-effort, --chat-template-kwargs)"
    )


def run_labels(run: RunLog) -> dict[str, Any]:
    """The run's labels as thresholds.resolve_floor matches them."""
    from evalgate.evidence.model import to_document

    document: dict[str, Any] = to_document(run.labels)
    return document


def _with_counts(protocol: EvalRecord, counts: RequestCounts) -> EvalRecord:
    return msgspec.structs.replace(protocol, requests=counts)


def run_gate(
    settings: Settings,
    *,
    progress: Progress | None = None,
    resume: bool = False,
    prior: Checked | None = None,
    topology: dict[str, Any] | None = None,
) -> RunOutcome:
    """Run every stage; write result.json whatever happens; never raise EvalgateError.

    `prior` skips readiness, context and probe, reusing what an earlier run against the same
    live engine established; `topology` is recorded among the result's labels."""
    scrub.configure(*credentials(settings))  # the evidence never holds a secret the engine echoed
    gate = GateRun(settings, progress=progress, resume=resume, prior=prior, topology=topology)
    try:
        return _record(gate, *_attempt(gate))
    finally:  # after the last write: the next run may have the folder
        if gate.lock is not None:
            gate.lock.release()


def _attempt(gate: GateRun) -> tuple[Status, str, int, EvalgateError | None]:
    """The run's stages, and what stopped them (with the answers received so far saved)."""
    error: EvalgateError | None = None
    status: Status
    try:
        status, reason, code = gate.execute()
    except EvalgateError as exc:
        error = exc
        status = "aborted" if isinstance(exc, AbortedError) else "error"
        reason, code = exc.message, int(exc.exit_code)
    except KeyboardInterrupt:
        error = AbortedError("interrupted by a signal")
        status, reason, code = "aborted", error.message, int(ExitCode.ABORTED)
    except OSError as exc:  # the disk refused a write: full, read-only, a folder in the way
        error = artifacts.cannot_write(gate.out, exc)
        status, reason, code = "error", error.message, int(ExitCode.EVAL)
    except Exception as exc:  # an evalgate bug or an answer nobody foresaw: still leave evidence
        log.debug("unexpected error", exc_info=True)
        error = EvalFailedError(
            f"unexpected {type(exc).__name__} at stage {gate.log.stage}: {exc}. "
            "Rerun with -v for the traceback, and please report it."
        )
        status, reason, code = "error", error.message, int(ExitCode.EVAL)
    if error is not None:
        try:
            gate.partial_samples()
        except OSError as exc:  # a full disk: the error already says so
            log.warning("could not write the samples received so far: %s", exc.strerror)
        except Exception as exc:  # a signal may have broken an import: the error still stands
            log.warning("could not write the samples received so far: %r", exc)
    return status, reason, code, error


def _record(
    gate: GateRun, status: Status, reason: str, code: int, error: EvalgateError | None
) -> RunOutcome:
    """Write result.json (never into a folder this run did not prepare) and say how it went."""
    out = gate.out
    result = build_result(gate.log, status=status, reason=reason, exit_code=code, error=error)
    path: Path | None = None
    if gate.prepared:  # never write into a folder whose earlier result we refused to bury
        try:
            path = artifacts.write_result(out, result)
        except (EvalgateError, OSError) as exc:
            log.debug("could not write the result to %s", out, exc_info=True)
            # The result on disk, if any, is the "running" one written first (exit code 4):
            # the exit code must tell the same story, and a verdict without evidence is none.
            if code != ExitCode.EVAL or error is None:
                target = out / artifacts.RESULT_NAME
                detail = (
                    artifacts.cannot_write(target, exc).message
                    if isinstance(exc, OSError)
                    else exc.message
                )
                error = EvalFailedError(f"the {status} verdict could not be recorded: {detail}")
                status, reason, code = "error", error.message, int(ExitCode.EVAL)
            path = _record_in_little_room(gate, status=status, reason=reason, error=error)
    checked = gate.checked or gate.prior
    return RunOutcome(code, status, reason, path, result, error, checked, gate.comparison)


def _record_in_little_room(
    gate: GateRun, *, status: Status, reason: str, error: EvalgateError | None
) -> Path | None:
    """The disk refused result.json: make room by removing this run's samples and raw results
    (the journal keeps every answer for --resume) and record the error, so that result.json
    says what the exit code says instead of "running". None when even that does not fit."""
    out = gate.settings.output_dir
    removed = [
        name for name in (artifacts.RAW_NAME, artifacts.SAMPLES_NAME) if (out / name).exists()
    ]
    for name in removed:
        (out / name).unlink(missing_ok=True)
    run = gate.log
    run.files = {k: v for k, v in run.files.items() if v not in removed}
    if removed:
        run.warnings.append(
            f"{' and '.join(removed)} removed to make room for this result on a full disk; "
            f"{artifacts.JOURNAL_NAME} keeps the answers for --resume"
        )
    result = build_result(run, status=status, reason=reason, exit_code=ExitCode.EVAL, error=error)
    try:
        return artifacts.write_result(out, result)
    except (EvalgateError, OSError) as exc:
        log.warning("could not record the result in %s either: %s", out, exc)
        return None
