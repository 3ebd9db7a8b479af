"""One gate run, stage by stage: thresholds, data, readiness, context, probe, eval, verdict; a
result.json on every path, errors returned, never printed (docs/architecture.md, `evalgate run`).
"""

from __future__ import annotations

import importlib.util
import logging
import signal
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalgate import scrub
from evalgate._version import EVAL_EXTRA
from evalgate.compare.runs import Run, check_baseline, load_run, refuse_overlap
from evalgate.errors import (
    AbortedError,
    ArtifactError,
    EvalFailedError,
    EvalgateError,
    ExitCode,
    UsageError,
    interrupt_within,
)
from evalgate.eval.stage import EvalStage, check_acceptance, protocol, simulated_sources
from evalgate.evidence import artifacts, folder
from evalgate.evidence.model import Result, Sample, Status, ThresholdRecord, to_document
from evalgate.gate import judge
from evalgate.gate.runlog import RunLog, build_result, labels
from evalgate.gate.verdict import Verdict, decide
from evalgate.probe.preflight import Checked, check, reuse
from evalgate.settings.values import Settings, credentials
from evalgate.tasks.dataset import Dataset, full_size
from evalgate.tasks.spec import BUILT_IN, TaskSpec, build_prompts, load_data, load_task
from evalgate.thresholds import Floor, check_task_keys, load_thresholds, resolve_floor

if TYPE_CHECKING:
    from collections.abc import Callable

    from evalgate.eval.dispatch import Progress

log = logging.getLogger(__name__)


def require_eval_extra(what: str) -> None:
    """A gate run drives lm-eval, which the core install leaves out: say so at once, with the
    line that installs it, not at the eval stage after the readiness wait."""
    if importlib.util.find_spec("lm_eval") is None:
        raise UsageError(
            f"{what} needs the eval extra (lm-eval), which this install lacks: {EVAL_EXTRA}"
        )


def own_folder(settings: Settings) -> Settings:
    """A run given no --output-dir gets a fresh folder under the default one, as lm-eval gives
    each run its own files: a second run by hand never meets the first one's result. Made only
    once the run has what it needs to start (else UsageError, and no folder)."""
    settings.endpoint.require()
    return settings.but(output_dir=folder.fresh(settings.output.output_dir))


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
    taken: bool = True
    """Whether the run made its folder its own; False: refused before it wrote a byte there."""


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
        on_take: Callable[[], object] | None = None,
    ) -> None:
        self.settings = settings
        self.on_take = on_take
        """Called once the folder is this run's, before its first write (a hook's files)."""
        self.checked = prior
        self.dataset: Dataset | None = None
        # A task file's path may hold anything, and "task" is one of the fields left unscrubbed
        # (scrub.OWN_FIELDS): scrubbed here, once, until the file's task name replaces it.
        asked = settings.eval.task
        task = asked if asked in BUILT_IN else scrub.text(asked)
        self.log = RunLog(settings.endpoint.model, labels(settings, topology), task)
        self.out = settings.output.output_dir
        self.eval = EvalStage(
            self.log, settings.endpoint, settings.eval, self.out, resume, progress
        )
        self.lock: folder.FolderLock | None = None
        """Held from before the folder's first check to after its last write (None: this run
        never held the folder, so it writes nothing there)."""
        self.comparison: str | None = None
        self.taken = False
        """Whether this run has made the folder its own (else it leaves it as it was)."""

    def _running(self) -> None:
        """result.json as "running" at the stage reached: what a run killed outright leaves."""
        if self.log.stage == "done":  # the verdict is written next
            return
        running = build_result(self.log, status="running", reason="in progress", exit_code=4)
        artifacts.write_result(self.out, running)

    def _take(self) -> None:
        """From here on the folder holds this run: an earlier run's files must not outlive it,
        and a run killed outright (SIGKILL) is seen as "running", never as the old verdict."""
        folder.clear_stale(self.out)
        if self.on_take is not None:
            self.on_take()
        self.taken = True
        self.log.checkpoint = self._running
        self._running()

    def execute(self) -> tuple[Status, str, int]:
        s = self.settings
        endpoint, asked, gate = s.endpoint, s.eval, s.gate
        run = self.log
        self._hold_folder()
        baseline = self._check_inputs()
        spec = load_task(endpoint.api, asked.task)
        floor = self._floor(spec)
        run.enter("dataset")
        dataset = self.dataset = load_data(
            asked.task, asked.dataset_dir, hub=asked.dataset_hub, spec=spec
        )
        prompts = build_prompts(spec, dataset.test, dataset.train, asked.limit)
        if baseline is not None and gate.baseline is not None:  # found before the eval
            self._check_plan(baseline, gate.baseline, spec, dataset)
        if not self.taken:
            self._take()

        sampling = spec.sampling | asked.request_fields()
        if self.checked is not None:
            reuse(run, self.checked)
        else:
            self.checked = check(run, endpoint, s.context, spec, prompts, sampling=sampling)
        run.enter("eval")
        budget = self.checked.context.max_tokens
        evaluation = self.eval.evaluate(spec, dataset, prompts, budget, floor.value)
        run.enter("gate")
        verdict = self._judge(spec.name, floor, baseline, evaluation.samples)
        if not verdict.problems:
            run.enter("done")
        return verdict.outcome, verdict.reason, int(verdict.exit_code)

    def _hold_folder(self) -> None:
        """The run's folder held, and made its own at once when no earlier run is in it."""
        s = self.settings
        if s.gate.baseline is not None:  # before anything is written: never over the baseline
            refuse_overlap(s.gate.baseline, self.out)
        try:
            self.lock = folder.prepare(
                self.out, overwrite=s.output.overwrite, resume=self.eval.resume
            )
        except ArtifactError:
            s.endpoint.require()  # what is missing is said first: the folder's state comes after
            raise
        if self.lock.warning is not None:
            self.log.warnings.append(self.lock.warning)
        # An earlier run in the folder (one --resume continues, one --overwrite replaces) is
        # left as it was until the inputs are checked: a run refused for them changes nothing
        # (RELIABILITY.md, "A refusal changes nothing").
        earlier = (artifacts.RESULT_NAME, artifacts.JOURNAL_NAME, *folder.STALE)
        if not any((self.out / name).exists() for name in earlier):
            self._take()

    def _check_inputs(self) -> Run | None:
        """What the run needs before it starts (the endpoint, lm-eval, an acceptance it may
        simulate), and the --baseline run, if any, read."""
        s = self.settings
        s.endpoint.require()
        require_eval_extra("a gate run")
        simulated = check_acceptance(
            simulated_sources(s.eval.sglang_simulate_acc_len, s.context.server_args),
            allowed=s.eval.allow_simulated_acceptance,
        )
        self.log.warnings += [simulated] if simulated else []
        if s.gate.baseline is None:
            return None
        return load_run(s.gate.baseline)  # read before anything runs: a broken one fails at once

    def _floor(self, spec: TaskSpec) -> Floor:
        """The threshold stage: the floor thresholds.json gives this run's model, labels and
        task, recorded."""
        run, asked = self.log, self.settings.eval
        run.enter("thresholds")
        run.task = asked.task if asked.task in BUILT_IN else spec.name  # a file's: now it is read
        thresholds = load_thresholds(self.settings.gate.thresholds)
        check_task_keys(thresholds, [run.task])
        model = self.settings.endpoint.model
        floor = resolve_floor(thresholds, model, to_document(run.labels), run.task)
        run.threshold = ThresholdRecord(value=floor.value, matched=floor.matched, file=floor.file)
        return floor

    def _check_plan(self, baseline: Run, path: Path, spec: TaskSpec, dataset: Dataset) -> None:
        """The eval's protocol as planned, checked against --baseline's before the eval (the
        budget is known after the probe: it is compared with the rest after the eval)."""
        asked = self.settings.eval
        planned = protocol(
            spec,
            dataset,
            api=self.settings.endpoint.api,
            limit=asked.limit,
            max_tokens=baseline.eval.max_tokens,
        )
        check_baseline(baseline, path, planned)

    def _judge(
        self, task: str, floor: Floor, baseline: Run | None, samples: list[Sample]
    ) -> Verdict:
        """The gate rule on the scores, with the run-level problems and the comparison with
        --baseline beside them."""
        gate, run = self.settings.gate, self.log
        dispatch = self.eval.dispatch
        notes = dispatch.replies.notes() if dispatch is not None else []
        allowed = self.settings.eval.max_failed_requests
        problems = judge.problems(run, gate, notes, failures_allowed=allowed)
        doubts: list[str] = []
        comparison = None
        if baseline is not None and gate.baseline is not None:
            comparison, regressed, doubts = judge.compare_baseline(
                run, self.out, baseline, path=gate.baseline, max_drop=gate.max_drop, samples=samples
            )
            problems += regressed
        run.verdict = decide(
            run.scores,
            floor.value,
            min_samples=gate.min_samples if gate.min_samples is not None else full_size(task),
            matched=floor.matched,
            problems=problems,
            doubts=doubts,
            early_stop=run.eval.early_stop if run.eval else None,
        )
        if comparison is not None:
            self.comparison = judge.record_comparison(
                run, self.out, comparison, run.verdict.outcome
            )
        return run.verdict


def run_gate(
    settings: Settings,
    *,
    progress: Progress | None = None,
    resume: bool = False,
    prior: Checked | None = None,
    topology: dict[str, Any] | None = None,
    on_take: Callable[[], object] | None = None,
) -> RunOutcome:
    """Run every stage; write result.json whatever happens; never raise EvalgateError. `prior`
    skips readiness, context and probe, reusing what an earlier run against the same live
    engine established; `topology` is recorded among the result's labels; `on_take` is
    called when the run makes its folder its own (never, when it is refused before)."""
    scrub.configure(*credentials(settings))  # the evidence never holds a secret the engine echoed
    gate = GateRun(
        settings, progress=progress, resume=resume, prior=prior, topology=topology, on_take=on_take
    )
    held = _HeldStops()
    try:
        return _record(gate, *_attempt(gate, held), held=held)
    finally:  # after the last write: the next run may have the folder
        if gate.lock is not None:
            gate.lock.release()
        held.release()


class _HeldStops:
    """Once the stages have ended, a signal evalgate handles (a stop) waits until the run has
    recorded how it ended: landing in that write, it would cut it (result.json left "running",
    or none). It lands on release, as if sent then. Only the main thread handles signals."""

    def __init__(self) -> None:
        self.previous: dict[int, Any] = {}
        self.landed: list[int] = []

    def hold(self) -> None:
        if self.previous or threading.current_thread() is not threading.main_thread():
            return
        for signum in signal.valid_signals():
            if callable(signal.getsignal(signum)):
                self.previous[signum] = signal.signal(signum, self._remember)

    def _remember(self, signum: int, frame: object) -> None:
        self.landed.append(signum)

    def release(self) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        self.previous = {}
        if self.landed:
            signal.raise_signal(self.landed[0])


def _attempt(gate: GateRun, held: _HeldStops) -> tuple[Status, str, int, EvalgateError | None]:
    """The run's stages, and what stopped them (with the answers received so far saved)."""
    try:
        return (*gate.execute(), None)
    except KeyboardInterrupt:
        error: EvalgateError = AbortedError("interrupted by a signal")
    except Exception as exc:
        error = _failure(gate, exc)
    held.hold()
    try:
        gate.eval.partial_samples(gate.dataset)
    except Exception as exc:  # a full disk, or a signal broke an import: the error still stands
        detail = exc.strerror if isinstance(exc, OSError) else repr(exc)
        log.warning("could not write the samples received so far: %s", detail)
    status: Status = "aborted" if isinstance(error, AbortedError) else "error"
    return status, error.message, int(error.exit_code), error


def _failure(gate: GateRun, exc: Exception) -> EvalgateError:
    """What a failed stage says: evalgate's own error as it is, the others named."""
    if interrupt_within(exc) is not None:  # the stop signal, wrapped on its way
        return AbortedError("interrupted by a signal")
    if isinstance(exc, EvalgateError):
        return exc
    if isinstance(exc, OSError):  # a write refused (a full disk), or too many open files
        return artifacts.os_failure(gate.out, exc)
    if isinstance(exc, ImportError | MemoryError):  # a memory limit, or an install missing a part
        return artifacts.refused_load(f"at stage {gate.log.stage}", exc)
    # an evalgate bug or an answer nobody foresaw: still leave evidence
    log.debug("unexpected error", exc_info=True)
    return EvalFailedError(
        f"unexpected {type(exc).__name__} at stage {gate.log.stage}: {exc}. "
        "Rerun with -v for the traceback, and please report it."
    )


def _record(
    gate: GateRun,
    status: Status,
    reason: str,
    code: int,
    error: EvalgateError | None,
    *,
    held: _HeldStops,
) -> RunOutcome:
    """Write result.json (never into a folder this run did not prepare) and say how it went."""
    held.hold()
    out = gate.out
    result = build_result(gate.log, status=status, reason=reason, exit_code=code, error=error)
    path: Path | None = None
    if gate.taken:  # never into a folder whose earlier result we refused to bury or continue
        try:
            path = artifacts.write_result(out, result)
        except (EvalgateError, OSError) as exc:
            log.debug("could not write the result to %s", out, exc_info=True)
            # The result on disk, if any, is the "running" one written first (exit code 4):
            # the exit code must tell the same story, and a verdict without evidence is none.
            if code != ExitCode.EVAL or error is None:
                detail = (
                    artifacts.os_failure(out / artifacts.RESULT_NAME, exc).message
                    if isinstance(exc, OSError)
                    else exc.message
                )
                error = EvalFailedError(f"the {status} verdict could not be recorded: {detail}")
                status, reason, code = "error", error.message, int(ExitCode.EVAL)
            path = _record_in_little_room(gate, status=status, reason=reason, error=error)
    return RunOutcome(
        code, status, reason, path, result, error, gate.checked, gate.comparison, gate.taken
    )


def _record_in_little_room(
    gate: GateRun, *, status: Status, reason: str, error: EvalgateError | None
) -> Path | None:
    """The disk refused result.json: make room by removing this run's samples and raw results
    (the journal keeps every answer for --resume) and record the error, so that result.json
    says what the exit code says instead of "running". None when even that does not fit."""
    out = gate.out
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
