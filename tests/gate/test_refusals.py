"""A refusal changes nothing: every file that was in the folder before a refused `run`, `hook`
(evalgate's layout and the harness's) or `--resume` is byte for byte the same after it; only
the lock file may be created or hold the refusing process's id (RELIABILITY.md, "A refusal
changes nothing"). Each command runs as its own process against the loopback engine."""

from __future__ import annotations

import json

import pytest

from tests.conftest import (
    RERUN_HOOK,
    RERUN_RUN,
    checksums,
    load_result,
    run_args,
    run_subprocess,
    verify_code,
)
from tests.evidence.test_harness import SERVED, job_env
from tests.evidence.test_harness import run as harness_hook
from tests.fakeengine import EngineBehaviour, FakeEngine, Fault

pytestmark = pytest.mark.loopback


RERUNS = [
    # (command, its options, what a rerun says, what a rerun with --resume says, files kept)
    (
        "run",
        RERUN_RUN,
        ["already holds a result (status pass)"],
        ["already holds a result (status pass)"],
        {"result.json", "samples.jsonl", "journal.jsonl"},
    ),
    (
        "hook",
        RERUN_HOOK,
        ["conc-4/result.json already holds a result (status pass)"],
        ["every concurrency staged in", "has finished (4: pass, 8: pass): nothing to continue"],
        {"hook.json", "conc-4/result.json", "conc-8/meta_env.json"},
    ),
]


@pytest.mark.parametrize("case", [r[1:] for r in RERUNS], ids=[r[0] for r in RERUNS])
def test_a_refused_rerun_leaves_every_file_and_the_verdict_as_they_were(engine, tmp_path, case):
    options, again_says, resumed_says, kept = case
    out = tmp_path / "out"
    first = run_subprocess(*run_args(engine.url, out, **options))
    assert first.returncode == 0, first.stderr
    before = checksums(out)
    verdict = verify_code(out)
    asked = len(engine.requests)
    again = run_subprocess(*run_args(engine.url, out, **options))
    resumed = run_subprocess(*run_args(engine.url, out, "--resume", **options))
    assert len(engine.requests) == asked  # the engine never asked
    assert checksums(out) == before
    for refused, says in ((again, again_says), (resumed, resumed_says)):
        assert refused.returncode == 2, refused.stderr
        assert all(said in refused.stderr for said in says), refused.stderr
    assert kept <= set(before)
    assert verify_code(out) == verdict and verdict[0] == 0


def test_a_resume_refused_for_its_inputs_leaves_the_run_it_would_continue(tmp_path):
    """An errored run (resumable), then --resume with a thresholds file that is not there:
    exit 2, and the errored run's result.json, journal and samples as they were."""
    out = tmp_path / "run"
    with FakeEngine(EngineBehaviour(max_model_len=4096)) as engine:
        engine.inject(Fault("error", status=400, nth=[5], message="max_tokens is too large"))
        first = run_subprocess(*run_args(engine.url, out, **RERUN_RUN))
    assert load_result(out)["status"] == "error", first.stderr
    before = checksums(out)
    missing = tmp_path / "no-such-thresholds.json"
    with FakeEngine(EngineBehaviour(max_model_len=4096)) as engine:
        resumed = run_subprocess(
            *run_args(engine.url, out, "--resume", thresholds=missing, **RERUN_RUN)
        )
    assert resumed.returncode == 2, resumed.stderr
    assert str(missing) in resumed.stderr
    assert checksums(out) == before
    assert load_result(out)["status"] == "error"


def test_a_refused_harness_hook_rerun_leaves_the_jobs_files_and_its_pass(tmp_path):
    """The job re-run in a folder that holds a passing hook (--layout harness): exit 2, and
    meta_env.json, hook.json, the results and samples as they were; verify still says PASS."""
    out = tmp_path / "job"
    with FakeEngine(EngineBehaviour(model=SERVED, max_model_len=4096)) as engine:
        code, output = harness_hook(job_env(engine.port), out)
        assert code == 0, output
        before = checksums(out)
        verdict = verify_code(out)
        again, said = harness_hook(job_env(engine.port), out)
        resumed, said_resumed = harness_hook(job_env(engine.port), out, "--resume")
    assert checksums(out) == before
    assert again == resumed == 2, said + said_resumed
    assert "already holds a result (status pass)" in said
    assert "nothing to continue" in said_resumed
    meta = json.loads((out / "meta_env.json").read_text())
    assert meta["completed_eval_concs"] == [4, 8] and meta["failed_eval_concs"] == []
    assert verify_code(out) == verdict and verdict[0] == 0


def test_a_hook_resumed_keeps_its_finished_runs_as_they_were_and_continues_the_rest(tmp_path):
    """conc 4 passed, conc 8 errored mid-eval: --resume leaves conc 4's files byte for byte
    and finishes conc 8 (evalgate's layout)."""
    out = tmp_path / "stage"
    with FakeEngine(EngineBehaviour(max_model_len=4096)) as engine:
        engine.inject(Fault("error", status=400, nth=[30], message="max_tokens is too large"))
        first = run_subprocess(*run_args(engine.url, out, **RERUN_HOOK))
    assert load_result(out / "conc-8")["status"] == "error"
    kept = {k: v for k, v in checksums(out).items() if k.startswith("conc-4/")}
    with FakeEngine(EngineBehaviour(max_model_len=4096)) as engine:
        resumed = run_subprocess(*run_args(engine.url, out, "--resume", **RERUN_HOOK))
    assert first.returncode != 0 and resumed.returncode == 0, resumed.stderr
    assert {k: v for k, v in checksums(out).items() if k.startswith("conc-4/")} == kept
    summary = json.loads((out / "hook.json").read_text())
    assert [(r["concurrency"], r["status"]) for r in summary["runs"]] == [(4, "pass"), (8, "pass")]
    assert verify_code(out)[0] == 0


def test_a_harness_hook_resumed_keeps_the_staged_files_of_its_finished_runs(tmp_path):
    out = tmp_path / "job"
    with FakeEngine(EngineBehaviour(model=SERVED, max_model_len=4096)) as engine:
        engine.inject(Fault("error", status=400, nth=[50], message="max_tokens is too large"))
        harness_hook(job_env(engine.port), out)
    meta = json.loads((out / "meta_env.json").read_text())
    assert meta["completed_eval_concs"] == [4] and meta["failed_eval_concs"] == [8]
    (staged,) = out.glob("results_*_conc4.json")
    kept = {
        k: v for k, v in checksums(out).items() if "conc4" in k or k.startswith("evalgate/conc-4/")
    }
    with FakeEngine(EngineBehaviour(model=SERVED, max_model_len=4096)) as engine:
        code, output = harness_hook(job_env(engine.port), out, "--resume")
    assert code == 0, output
    after = checksums(out)
    assert {k: after.get(k) for k in kept} == kept and staged.name in kept
    meta = json.loads((out / "meta_env.json").read_text())
    assert meta["completed_eval_concs"] == [4, 8] and meta["failed_eval_concs"] == []
    assert len(list(out.glob("results_*_conc8.json"))) == 1
    assert verify_code(out)[0] == 0


def test_a_run_overwrite_refused_for_its_inputs_leaves_the_run_it_would_replace(tmp_path):
    """--overwrite with a thresholds file that is not there, a task unknown, a baseline that is
    no run: exit 2, and the passing run's files as they were (not an error result)."""
    out = tmp_path / "run"
    bad = [
        ("--thresholds", str(tmp_path / "missing.json")),
        ("--task", "no-such-task"),
        ("--baseline", str(tmp_path / "nowhere")),
    ]
    with FakeEngine(EngineBehaviour(max_model_len=4096)) as engine:
        first = run_subprocess(*run_args(engine.url, out, **RERUN_RUN))
        assert first.returncode == 0, first.stderr
        before = checksums(out)
        asked = len(engine.requests)
        refusals = [
            run_subprocess(*run_args(engine.url, out, "--overwrite", *flags, **RERUN_RUN))
            for flags in bad
        ]
        assert len(engine.requests) == asked
    for refused, (_, value) in zip(refusals, bad, strict=True):
        assert refused.returncode == 2, refused.stderr
        assert value in refused.stderr
    assert checksums(out) == before
    assert load_result(out)["status"] == "pass"


def test_a_hook_overwrite_refused_for_its_inputs_leaves_the_job_as_it_was(tmp_path):
    """hook --overwrite with a thresholds file that is not there, in both layouts: exit 2, no
    run folder, hook.json or meta_env.json rewritten; verify still says PASS."""
    stage, job, missing = tmp_path / "stage", tmp_path / "job", tmp_path / "missing.json"
    refuse = ("--overwrite", "--thresholds", str(missing))
    with FakeEngine(EngineBehaviour(max_model_len=4096)) as engine:
        assert run_subprocess(*run_args(engine.url, stage, **RERUN_HOOK)).returncode == 0
        stage_before = checksums(stage)
        refused = run_subprocess(*run_args(engine.url, stage, *refuse, **RERUN_HOOK))
    with FakeEngine(EngineBehaviour(model=SERVED, max_model_len=4096)) as engine:
        code, output = harness_hook(job_env(engine.port), job)
        assert code == 0, output
        job_before = checksums(job)
        job_code, job_said = harness_hook(job_env(engine.port), job, *refuse)
    assert refused.returncode == job_code == 2, refused.stderr + job_said
    assert str(missing) in refused.stderr and str(missing) in job_said
    assert checksums(stage) == stage_before and checksums(job) == job_before
    assert verify_code(stage)[0] == verify_code(job)[0] == 0


def test_a_hook_resume_refused_for_its_inputs_leaves_the_job_as_it_was(tmp_path):
    """conc 4 passed, conc 8 errored; --resume with a thresholds file that is not there, in
    both layouts: exit 2, hook.json, meta_env.json and conc 8's journal as they were."""
    stage, job, missing = tmp_path / "stage", tmp_path / "job", tmp_path / "missing.json"
    with FakeEngine(EngineBehaviour(max_model_len=4096)) as engine:
        engine.inject(Fault("error", status=400, nth=[30], message="max_tokens is too large"))
        run_subprocess(*run_args(engine.url, stage, **RERUN_HOOK))
    with FakeEngine(EngineBehaviour(model=SERVED, max_model_len=4096)) as engine:
        engine.inject(Fault("error", status=400, nth=[50], message="max_tokens is too large"))
        harness_hook(job_env(engine.port), job)
    assert load_result(stage / "conc-8")["status"] == "error"
    assert json.loads((job / "meta_env.json").read_text())["failed_eval_concs"] == [8]
    before = checksums(stage), checksums(job)
    with FakeEngine(EngineBehaviour(max_model_len=4096)) as engine:
        refused = run_subprocess(
            *run_args(engine.url, stage, "--resume", thresholds=missing, **RERUN_HOOK)
        )
    with FakeEngine(EngineBehaviour(model=SERVED, max_model_len=4096)) as engine:
        job_code, job_said = harness_hook(
            job_env(engine.port), job, "--resume", "--thresholds", str(missing)
        )
    assert refused.returncode == job_code == 2, refused.stderr + job_said
    assert str(missing) in refused.stderr and str(missing) in job_said
    assert (checksums(stage), checksums(job)) == before
