"""The node-0 post-benchmark hook: the gate at each concurrency against the same live engine,
probed once, its evidence staged as it goes (README.md, "How it fits a benchmark pipeline";
``--layout harness``: docs/harness.md).
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalgate import numbers
from evalgate.environment import job_environment
from evalgate.errors import ArtifactError, ExitCode, UsageError
from evalgate.evidence import artifacts, folder
from evalgate.evidence import harness as harness_files
from evalgate.evidence.harness import EVALGATE_DIR
from evalgate.evidence.model import HookRun, HookSummary
from evalgate.probe.preflight import Checked
from evalgate.run import RunOutcome, run_gate
from evalgate.settings.values import Settings

if TYPE_CHECKING:
    from evalgate.eval.dispatch import Progress

log = logging.getLogger(__name__)
_SEVERITY = {  # which outcome decides the job's exit code when runs differ
    int(ExitCode.ABORTED): 6,
    int(ExitCode.USAGE): 5,
    int(ExitCode.ENDPOINT): 4,
    int(ExitCode.EVAL): 3,
    int(ExitCode.FAIL): 2,
    int(ExitCode.INCONCLUSIVE): 1,
    int(ExitCode.PASS): 0,
}


@dataclass(frozen=True)
class HookOutcome:
    """The job's exit code, and hook.json's summary of every concurrency's outcome."""

    exit_code: int
    summary: HookSummary


def parse_concurrencies(text: str) -> list[int]:
    """'16,64,256' (or spaces) -> [16, 64, 256]; a clear error for anything else."""
    try:
        return numbers.concurrencies(text)
    except ValueError as exc:
        raise UsageError(
            f"--concurrency {text!r} (or EVAL_CONC, EVAL_CONCURRENT_REQUESTS, CONC) is not a "
            f"list of distinct positive integers: {exc}."
        ) from None


def meta_env(settings: Settings, concurrency: int, env: Mapping[str, str]) -> dict[str, Any]:
    """evalgate's meta_env.json for one run: its labels, and the job's topology under the
    harness's own keys (tp, ep, dp_attention, prefill_*, decode_*), for its collector."""
    job, lengths = settings.labels, settings.context
    return {
        "framework": job.framework,
        "precision": job.precision,
        "model": settings.endpoint.model,
        "model_prefix": job.model_prefix,
        "hardware": job.hardware,
        "isl": lengths.isl,
        "osl": lengths.osl,
        "conc": concurrency,
        "kv_cache_dtype": job.kv_cache_dtype,
        "spec_decoding": job.spec_decoding,
        "is_multinode": job.is_multinode,
        **harness_files.job_fields(env),
    }


def run_hook(
    settings: Settings,
    concurrencies: Sequence[int],
    *,
    resume: bool = False,
    environ: Mapping[str, str] = os.environ,
    progress: Progress | None = None,
) -> HookOutcome:
    """Gate at each concurrency; stage everything under settings.output_dir, held for the whole
    hook, as each run holds its own folder."""
    out = settings.output.output_dir
    with folder.FolderLock(out) as lock:
        if lock.warning is not None:
            log.warning("%s", lock.warning)
        env = job_environment(environ)
        in_harness = settings.output.layout == "harness"
        stage = out / EVALGATE_DIR if in_harness else out
        try:
            kept = _check_folders(
                stage,
                concurrencies,
                resume=resume,
                harness=in_harness,
                overwrite=settings.output.overwrite,
            )
        except ArtifactError:
            settings.endpoint.require()  # what is missing is said first, as a run says it
            raise
        harness = None
        if in_harness:
            _warn_tasks_dir(settings.eval.eval_tasks_dir)
            harness = HarnessStage(out, settings, env, concurrencies)
        hook = _Hook(settings, stage, env, harness, resume=resume, progress=progress)
        runs, stopped = hook.gate_each(concurrencies, kept)
        return _outcome(stage, runs, stopped)


def _warn_tasks_dir(tasks: Path | None) -> None:
    """The harness's EVAL_TASKS_DIR names a task file evalgate does not run: said, not refused."""
    if tasks and tasks.name != "gsm8k.yaml":
        log.warning(
            "EVAL_TASKS_DIR is %s: evalgate runs its own copy of the harness's gsm8k task, "
            "not that file",
            tasks,
        )


@dataclass
class _Hook:
    """The runs of one hook, one concurrency after another against the same live engine."""

    settings: Settings
    stage: Path
    env: Mapping[str, str]
    harness: HarnessStage | None
    resume: bool
    progress: Progress | None

    def gate_each(
        self, concurrencies: Sequence[int], kept: Mapping[int, RunOutcome]
    ) -> tuple[dict[int, RunOutcome | None], str | None]:
        """Each concurrency's outcome (None: never run), and why the hook stopped early (if it
        did): the first run that establishes the endpoint, context and probe lends them to the
        rest; an abort, or an error before any run established them, stops the hook."""
        topology = harness_files.job_topology(self.settings.labels, self.env)
        runs: dict[int, RunOutcome | None] = dict.fromkeys(concurrencies)
        prior: Checked | None = None
        wrote = False
        for concurrency in concurrencies:
            if concurrency in kept:  # --resume: a finished run stays as it is, counted
                runs[concurrency] = kept[concurrency]
                if self.harness is not None:
                    self.harness.completed.append(concurrency)
                continue
            outcome = runs[concurrency] = self.gate(concurrency, prior, topology)
            if not (outcome.taken or wrote) and outcome.error is not None:
                raise outcome.error  # refused before this hook wrote a byte: exit 2, no hook.json
            wrote = True
            if self.harness is not None:
                self.harness.record(concurrency, outcome)
            if outcome.status in ("pass", "fail", "inconclusive"):
                prior = prior or outcome.checked
            if outcome.status == "aborted" or (outcome.status == "error" and prior is None):
                return runs, f"{outcome.status} at stage {outcome.result.stage}: {outcome.reason}"
        return runs, None

    def gate(
        self, concurrency: int, prior: Checked | None, topology: dict[str, Any] | None
    ) -> RunOutcome:
        """One run of the gate at `concurrency`, in its own folder of the staging folder."""
        run_dir = self.stage / f"conc-{concurrency}"
        update: dict[str, Any] = {"num_concurrent": concurrency, "output_dir": run_dir}
        if self.harness is not None and self.settings.gate.min_samples is None:
            update["min_samples"] = 0  # the harness's validator decides on the point estimate
        # The hook's own files are written once a run has made its folder its own: a run
        # refused for its inputs leaves every file of the job as it was.
        on_take = (
            self.harness.write_meta
            if self.harness is not None
            else functools.partial(
                artifacts.write_json,
                run_dir / artifacts.META_NAME,
                meta_env(self.settings, concurrency, self.env),
            )
        )
        return run_gate(
            self.settings.but(**update),
            progress=self.progress,
            resume=self.resume,
            prior=prior,
            topology=topology,
            on_take=on_take,
        )


@dataclass
class HarnessStage:
    """The benchmark harness's files in the staging folder, kept current run by run."""

    out: Path
    settings: Settings
    env: Mapping[str, str]
    concurrencies: Sequence[int]
    completed: list[int] = field(default_factory=list)

    def write_meta(self) -> None:
        failed = [c for c in self.concurrencies if c not in self.completed]
        s = self.settings
        meta = harness_files.meta_env(
            s.labels,
            self.env,
            self.concurrencies,
            self.completed,
            failed,
            served_model=s.endpoint.served_model,
            isl=s.context.isl,
            osl=s.context.osl,
        )
        artifacts.write_json(self.out / artifacts.META_NAME, meta)

    def record(self, concurrency: int, outcome: RunOutcome) -> None:
        """One run's results and samples, and the meta_env.json that counts it."""
        if outcome.result_path is not None:
            harness_files.stage_run(
                self.out,
                concurrency,
                outcome.result_path.parent,
                outcome.result,
                served_model=self.settings.endpoint.served_model,
                stamp=harness_files.timestamp(),
            )
        if harness_files.completed(outcome.result):
            self.completed.append(concurrency)
        self.write_meta()


def _check_folders(
    stage: Path, concurrencies: Sequence[int], *, resume: bool, harness: bool, overwrite: bool
) -> dict[int, RunOutcome]:
    """Every folder the hook will write into, checked before it writes a byte (a refusal
    changes nothing: RELIABILITY.md); with --resume, the finished runs it keeps as they are."""
    named = [stage / f"conc-{c}" for c in concurrencies] + ([stage] if harness else [])
    for path in named:  # the folders evalgate names; --output-dir itself may be a link
        folder.refuse_link(path)
    kept = _finished(stage, concurrencies) if resume and not overwrite else {}
    if kept and len(kept) == len(concurrencies):
        raise UsageError(
            f"--resume: every concurrency staged in {stage} has finished "
            f"({', '.join(f'{c}: {o.status}' for c, o in kept.items())}): nothing to "
            "continue. Stage a new hook in another --output-dir, or pass --overwrite."
        )
    for concurrency in concurrencies:
        if concurrency not in kept:
            folder.check_free(stage / f"conc-{concurrency}", overwrite=overwrite, resume=resume)
    return kept


def _finished(stage: Path, concurrencies: Sequence[int]) -> dict[int, RunOutcome]:
    """The runs staged under `stage` that finished (pass, fail, inconclusive), by
    concurrency: --resume keeps them as they are and continues the rest."""
    found: dict[int, RunOutcome] = {}
    for concurrency in concurrencies:
        path = stage / f"conc-{concurrency}" / artifacts.RESULT_NAME
        if not path.is_file() or path.is_symlink():
            continue
        try:
            result = artifacts.read_result(path)
        except ArtifactError:  # unreadable: check_free names it
            continue
        if result.status in ("pass", "fail", "inconclusive"):
            found[concurrency] = RunOutcome(
                result.exit_code, result.status, result.reason, path, result, None
            )
    return found


def _outcome(stage: Path, runs: dict[int, RunOutcome | None], stopped: str | None) -> HookOutcome:
    """hook.json written, and the job's exit code: the worst outcome (a run never made counts
    as the one that stopped the hook)."""
    listed = [
        HookRun(
            concurrency=concurrency,
            status="not run",
            reason=f"not run: an earlier run stopped the hook ({stopped})",
        )
        if outcome is None
        else HookRun(
            concurrency=concurrency,
            status=outcome.status,
            exit_code=outcome.exit_code,
            stage=outcome.result.stage,
            reason=outcome.reason,
            result=str(outcome.result_path.relative_to(stage)) if outcome.result_path else None,
        )
        for concurrency, outcome in runs.items()
    ]
    summary = HookSummary(
        concurrencies=list(runs),
        completed=[r.concurrency for r in listed if r.status in ("pass", "fail", "inconclusive")],
        runs=listed,
        stopped=stopped,
    )
    artifacts.write_hook(stage, summary)
    codes = [o.exit_code for o in runs.values() if o is not None]
    worst = max(codes, key=lambda c: _SEVERITY.get(c, 5)) if codes else int(ExitCode.EVAL)
    return HookOutcome(worst, summary)
