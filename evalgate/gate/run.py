"""One gate run, stage by stage: thresholds, data, readiness, context, probe, eval, verdict.

Whatever happens, result.json is written last, atomically, with the stage reached and why it
stopped. Errors are recorded and returned, never printed: the CLI decides what to show.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalgate.engine.client import EvalClient
from evalgate.errors import AbortedError, EvalFailedError, EvalgateError, ExitCode, ProbeError
from evalgate.evidence import artifacts, journal
from evalgate.evidence.record import Evidence, context_document, labels_document
from evalgate.gate import preflight
from evalgate.gate.context import EvalContext
from evalgate.gate.probe import ProbeOutcome
from evalgate.gate.verdict import decide
from evalgate.settings import Settings
from evalgate.tasks.dataset import Dataset, load_dataset
from evalgate.tasks.prompts import Prompt, build_prompts
from evalgate.tasks.spec import FEWSHOT_SEED, TaskSpec, load_task
from evalgate.thresholds import Floor, load_thresholds, resolve_floor

if TYPE_CHECKING:  # lm-eval loads only when an eval starts, after the probe
    from evalgate.gate.lm import Progress

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunOutcome:
    """What a run decided, where its evidence is, and the error that stopped it (if any)."""

    exit_code: int
    status: str
    reason: str
    result_path: Path | None
    document: dict[str, Any]
    error: EvalgateError | None
    checked: Checked | None = None
    """The endpoint, context and probe this run established, for reuse by the next run."""
    comparison: str | None = None
    """With --baseline: the comparison report, as text."""


@dataclass(frozen=True)
class Checked:
    """What readiness, context and probe established; valid while the same engine serves."""

    context: EvalContext
    endpoint: dict[str, Any] | None
    context_document: dict[str, Any]
    probe_document: dict[str, Any]


def _fingerprint(
    settings: Settings, evidence: Evidence, spec: TaskSpec, dataset: Dataset, questions: int
) -> dict[str, Any]:
    engine = (evidence.endpoint or {}).get("engine", {})
    context = evidence.context or {}
    return {
        "model": settings.model,
        "engine_version": engine.get("version"),
        "served": context.get("served"),
        "api": settings.api,
        "task_sha256": spec.sha256,
        "dataset_sha256": dataset.sha256,
        "max_tokens": context.get("max_tokens"),
        "questions": questions,
    }


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
        self.prior = prior
        self.checked: Checked | None = None
        self.dataset: Dataset | None = None
        self.progress = progress
        self.resume = resume
        self.evidence = Evidence(settings, topology=topology)
        self.out = settings.output_dir
        self.prepared = False

    def execute(self) -> tuple[str, str, int]:
        s = self.settings
        ev = self.evidence
        artifacts.prepare_output_dir(self.out, overwrite=s.overwrite, resume=self.resume)
        self.prepared = True
        # From here on the folder holds this run: an earlier run's files must not outlive it,
        # and a run killed outright (SIGKILL) is seen as "running", never as the old verdict.
        artifacts.clear_stale(self.out)
        artifacts.write_result(
            self.out,
            ev.document(status="running", reason="in progress", exit_code=int(ExitCode.EVAL)),
        )
        preflight.require(s, "base_url", "model")

        ev.enter("thresholds")
        floor = resolve_floor(load_thresholds(s.thresholds), s.model, labels_document(s))
        ev.threshold = {"value": floor.value, "matched": floor.matched, "file": floor.file}

        ev.enter("dataset")
        dataset = self.dataset = load_dataset(s.dataset_dir, hub=s.dataset_hub)
        spec = load_task(s.api)
        prompts = build_prompts(spec, dataset.test, dataset.train, s.limit)

        context = self._reuse(self.prior) if self.prior is not None else self._check(spec, prompts)
        ev.enter("eval")
        return self._eval(
            spec=spec,
            dataset=dataset,
            questions=len(prompts),
            max_tokens=context.max_tokens,
            floor=floor,
        )

    def _reuse(self, prior: Checked) -> EvalContext:
        """Another concurrency against the same live engine: no second probe."""
        ev = self.evidence
        ev.endpoint = prior.endpoint
        ev.context = prior.context_document
        ev.probe = prior.probe_document
        ev.warnings += prior.context.warnings
        return prior.context

    def _check(self, spec: TaskSpec, prompts: list[Prompt]) -> EvalContext:
        """Readiness, context and probe."""
        s = self.settings
        ev = self.evidence
        ev.set_endpoint(None, None)
        context, longest, engine = preflight.derive(s, prompts, ev.enter)
        if engine is not None:
            ev.set_endpoint(engine.owned_by, engine.version)
        ev.context = context_document(context)
        ev.warnings += context.warnings

        ev.enter("probe")
        ev.probe = {
            "outcome": "rejected",
            "max_tokens": context.max_tokens,
            "prompt_tokens": context.prompt_tokens.value if context.prompt_tokens else None,
            "doc_id": longest.doc_id,
        }
        try:
            ev.probe = _probe_document(
                preflight.probe(s, context, longest, spec.stop, spec.sampling)
            )
        except ProbeError as exc:
            if exc.engine_error is not None:
                ev.probe |= {
                    "status_code": exc.engine_error.status,
                    "engine_message": exc.engine_error.message,
                }
            raise
        self.checked = Checked(context, ev.endpoint, ev.context, ev.probe)
        return context

    def _eval(
        self, *, spec: TaskSpec, dataset: Dataset, questions: int, max_tokens: int, floor: Floor
    ) -> tuple[str, str, int]:
        from evalgate.gate.evaluate import lm_eval_version, run_eval
        from evalgate.gate.lm import GateLM

        s = self.settings
        ev = self.evidence
        ev.eval = {
            "task": spec.name,
            "task_version": spec.version,
            "task_sha256": spec.sha256,
            "api": s.api,
            "num_fewshot": spec.num_fewshot,
            "fewshot_seed": FEWSHOT_SEED,
            "limit": s.limit,
            "num_concurrent": s.num_concurrent,
            "max_tokens": max_tokens,
            "temperature": 0.0,
            "questions": questions,
            "lm_eval_version": lm_eval_version(),
            "dataset": dataset.describe(),
            "requests": {"total": 0, "completed": 0, "failed": 0, "truncated": 0, "empty": 0},
        }
        fingerprint = _fingerprint(s, ev, spec, dataset, questions)
        journal_path = self.out / journal.JOURNAL_NAME
        kept = journal.read_journal(journal_path, fingerprint) if self.resume else {}
        if kept:
            log.info("resuming: %d answers from %s are reused", len(kept), journal_path)
        self.journal = journal.Journal(journal_path, fingerprint, kept)
        base_url, model = preflight.endpoint(s)

        def client() -> EvalClient:
            return EvalClient(
                base_url=base_url,
                api_key=preflight.api_key(s),
                api=s.api,
                timeout=s.timeout,
                attempts=s.max_attempts,
                wait_min=s.retry_wait_min,
                wait_max=s.retry_wait_max,
                max_connections=s.num_concurrent,
            )

        self.lm = GateLM(
            client_factory=client,
            model=model,
            api=s.api,
            max_tokens=max_tokens,
            num_concurrent=s.num_concurrent,
            max_failed=s.max_failed_requests,
            journal=self.journal,
            resumed=kept,
            progress=self.progress,
            sampling=spec.sampling,
        )
        try:
            result = run_eval(spec, dataset, self.lm, s.limit)
        finally:
            self.journal.close()
            ev.eval["requests"] = self.lm.tally.as_dict()
        ev.scores = list(result.scores)
        artifacts.write_jsonl(self.out / artifacts.SAMPLES_NAME, result.samples)
        artifacts.write_json(self.out / artifacts.RAW_NAME, result.raw)
        ev.files = {
            "samples": artifacts.SAMPLES_NAME,
            "lm_eval_results": artifacts.RAW_NAME,
            "journal": journal.JOURNAL_NAME,
        }

        ev.enter("gate")
        tally = self.lm.tally
        if tally.failed:
            ev.warnings.append(
                f"{tally.failed} request(s) failed and were scored as wrong "
                f"(allowed by --max-failed-requests {s.max_failed_requests})"
            )
        verdict = decide(ev.scores, floor.value)
        ev.verdict = verdict
        truncated_rate = (tally.truncated + tally.empty) / max(tally.total, 1)
        if tally.truncated or tally.empty:
            ev.warnings.append(
                f"{tally.truncated} answer(s) ended by length and {tally.empty} "
                f"came back empty ({truncated_rate:.1%} of {tally.total})"
            )
        if truncated_rate > s.max_truncated_rate:
            return (
                "fail",
                f"{truncated_rate:.1%} of answers were truncated or empty, over "
                f"--max-truncated-rate {s.max_truncated_rate:.1%}",
                int(ExitCode.FAIL),
            )
        ev.enter("done")
        if verdict.passed:
            return "pass", verdict.reason, int(ExitCode.PASS)
        return "fail", verdict.reason, int(ExitCode.FAIL)

    def partial_samples(self) -> None:
        """On an error or abort mid-eval: the answers received so far, as samples.jsonl."""
        lm = getattr(self, "lm", None)
        if lm is None or not lm.tally.answers:
            return
        from evalgate.gate.evaluate import reference_answer

        test = self.dataset.test if self.dataset else []

        def doc(doc_id: int) -> dict[str, str]:
            return test[doc_id] if doc_id < len(test) else {"question": "", "answer": ""}

        records = [
            {
                "doc_id": doc_id,
                "question": doc(doc_id)["question"],
                "target": reference_answer(doc(doc_id)["answer"]),
                **answer,
                "filters": {},  # not scored: the eval did not finish
            }
            for doc_id, answer in sorted(lm.tally.answers.items())
        ]
        artifacts.write_jsonl(self.out / artifacts.SAMPLES_NAME, records)
        self.evidence.files.setdefault("samples", artifacts.SAMPLES_NAME)
        self.evidence.files.setdefault("journal", journal.JOURNAL_NAME)


def _probe_document(outcome: ProbeOutcome) -> dict[str, Any]:
    return {
        "outcome": outcome.outcome,
        "status_code": 200,
        "engine_message": None,
        "latency_s": round(outcome.latency_s, 3),
        "prompt_tokens": outcome.prompt_tokens,
        "max_tokens": outcome.max_tokens,
        "doc_id": outcome.doc_id,
    }


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
    run = GateRun(settings, progress=progress, resume=resume, prior=prior, topology=topology)
    error: EvalgateError | None = None
    try:
        status, reason, code = run.execute()
    except EvalgateError as exc:
        error = exc
        exc.stage = run.evidence.stage if run.evidence.stage != "settings" else exc.stage
        status = "aborted" if isinstance(exc, AbortedError) else "error"
        reason, code = exc.message, int(exc.exit_code)
    except KeyboardInterrupt:
        error = AbortedError("interrupted by a signal", stage=run.evidence.stage)
        status, reason, code = "aborted", error.message, int(ExitCode.ABORTED)
    except Exception as exc:  # an evalgate bug or an answer nobody foresaw: still leave evidence
        log.debug("unexpected error", exc_info=True)
        error = EvalFailedError(
            f"unexpected {type(exc).__name__} at stage {run.evidence.stage}: {exc}. "
            "Rerun with -v for the traceback, and please report it.",
            stage=run.evidence.stage,
        )
        status, reason, code = "error", error.message, int(ExitCode.EVAL)
    if error is not None:
        try:
            run.partial_samples()
        except OSError:
            log.exception("could not write the samples received so far")
    document = run.evidence.document(status=status, reason=reason, exit_code=code, error=error)
    path: Path | None = None
    if run.prepared:  # never write into a folder whose earlier result we refused to bury
        try:
            path = artifacts.write_result(settings.output_dir, document)
        except (EvalgateError, OSError) as exc:
            log.exception("could not write the result to %s", settings.output_dir)
            if code in (ExitCode.PASS, ExitCode.FAIL):  # no evidence, no verdict
                error = EvalFailedError(
                    f"the {status} verdict could not be recorded: writing "
                    f"{settings.output_dir / artifacts.RESULT_NAME} failed ({exc}). Free space or "
                    "choose another --output-dir, and run again.",
                    stage="artifacts",
                )
                status, reason, code = "error", error.message, int(ExitCode.EVAL)
    outcome = RunOutcome(code, status, reason, path, document, error, run.checked or prior)
    if settings.baseline is not None and path is not None and status in ("pass", "fail"):
        return _with_comparison(outcome, settings)
    return outcome


def _with_comparison(outcome: RunOutcome, settings: Settings) -> RunOutcome:
    """Compare the finished run with --baseline; the worse of gate and comparison decides."""
    from dataclasses import replace

    from evalgate.compare.comparison import compare_runs
    from evalgate.compare.report import comparison_document, render_text

    baseline = settings.baseline or Path()
    try:
        comparison = compare_runs(baseline, settings.output_dir, max_drop=settings.max_drop)
    except EvalgateError as exc:
        text = f"comparison with {baseline} refused: {exc.message}"
        return replace(outcome, comparison=text, exit_code=outcome.exit_code or int(exc.exit_code))
    artifacts.write_json(settings.output_dir / "comparison.json", comparison_document(comparison))
    code = outcome.exit_code or int(comparison.exit_code)
    return replace(outcome, comparison=render_text(comparison), exit_code=code)
