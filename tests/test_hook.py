"""The node-0 hook (`scripts/node0-eval-hook.sh` over `evalgate hook`) against a loopback engine:
a normal run, several concurrencies, a probe failure, an endpoint never ready, SIGTERM mid-eval,
and resume after an interruption."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalgate.errors import (
    UsageError,
)
from evalgate.hook import parse_concurrencies
from tests.conftest import (
    QUICK,
    ROOT,
    load_result,
    load_samples,
    run_args,
    run_subprocess,
)
from tests.fakeengine import EngineBehaviour, FakeEngine, Fault, refused_url
from tests.folders import RERUN_HOOK, SHORT, checksums, verify_code
from tests.harness import SERVED, harness_hook, job_env

HOOK = ROOT / "scripts" / "node0-eval-hook.sh"


def hook_env(engine_url: str, stage: Path, **extra: str) -> dict[str, str]:
    """Only what a benchmark job has in its environment, plus evalgate on PATH."""
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "PYTHONPATH": str(ROOT),  # this checkout's evalgate, whichever one is installed
        "HOME": os.environ.get("HOME", "/root"),
        "MODEL": "fake-model",
        "ISL": "1024",
        "OSL": "512",
        "ROUTER_URL": engine_url,
        "DECODE_SERVER_CONFIG": "--tensor-parallel-size 8 --max-model-len 3072 --port 8000",
        "EVALGATE_STAGE_DIR": str(stage),
        "EVALGATE_RETRY_WAIT_MIN": "0",
        "EVALGATE_RETRY_WAIT_MAX": "0",
        "EVALGATE_MIN_SAMPLES": "0",  # staging, not statistics: the point estimate decides
    }
    env.update(extra)
    return env


def start_hook(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(HOOK), *args],
        env=env,
        cwd=ROOT,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def run_hook(
    env: dict[str, str], *args: str, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(HOOK), *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.mark.loopback
def test_hook_stages_one_result_per_concurrency(tmp_path):
    stage = tmp_path / "stage"
    with FakeEngine(EngineBehaviour(max_model_len=4096)) as engine:
        done = run_hook(
            hook_env(
                engine.url, stage, CONC="4,8", PREFILL_TP="4", DECODE_TP="8", IS_MULTINODE="true"
            ),
            "--limit",
            "30",
        )
        probes = [r for r in engine.requests if r.body and r.body.get("stream")]
    assert done.returncode == 0, done.stderr
    assert "conc 4: PASS" in done.stdout and "conc 8: PASS" in done.stdout
    assert len(probes) == 1  # probed once for both concurrencies
    summary = json.loads((stage / "hook.json").read_text())
    assert summary["completed"] == [4, 8] and summary["stopped"] is None
    for conc in (4, 8):
        doc = load_result(stage / f"conc-{conc}")
        assert doc["status"] == "pass"
        assert doc["labels"]["concurrency"] == conc
        # A disaggregated job (IS_MULTINODE) is named by its phases, as the harness names it.
        assert doc["labels"]["topology"] == {
            "prefill_tp": 4,
            "prefill_ep": 1,
            "prefill_dp_attention": False,
            "prefill_num_workers": 1,
            "decode_tp": 8,
            "decode_ep": 1,
            "decode_dp_attention": False,
            "decode_num_workers": 1,
        }
        # The decode's server arguments clamp the context (the router reports 4096).
        assert doc["context"]["eval_max_model_len"] == 1024 + 512 + 256
        assert {"value": 3072, "source": "DECODE_SERVER_CONFIG"} in doc["context"]["served"]
        meta = json.loads((stage / f"conc-{conc}" / "meta_env.json").read_text())
        assert (meta["model"], meta["isl"], meta["osl"], meta["conc"]) == (
            "fake-model",
            1024,
            512,
            conc,
        )
        assert (meta["is_multinode"], meta["prefill_tp"], meta["decode_tp"]) == (True, 4, 8)
        assert len(load_samples(stage / f"conc-{conc}")) == 30


@pytest.mark.loopback
def test_probe_rejection_fails_the_job_with_evidence(tmp_path):
    stage = tmp_path / "stage"
    with FakeEngine(EngineBehaviour(max_model_len=4096)) as engine:
        done = run_hook(hook_env(engine.url, stage, CONC="4,8"), "--max-tokens", "12288")
    assert done.returncode == 3
    assert "max_tokens=12288 cannot be greater than max_model_len=4096" in done.stderr
    summary = json.loads((stage / "hook.json").read_text())
    assert summary["completed"] == []
    assert [r["status"] for r in summary["runs"]] == ["error", "not run"]
    assert load_result(stage / "conc-4")["stage"] == "probe"


@pytest.mark.loopback
def test_an_endpoint_never_ready_fails_within_its_timeout(tmp_path):
    stage = tmp_path / "stage"
    started = time.monotonic()
    done = run_hook(hook_env(refused_url(), stage, EVALGATE_READY_TIMEOUT="2"), timeout=60)
    elapsed = time.monotonic() - started
    assert done.returncode == 3
    assert "was not ready after" in done.stderr and "--ready-timeout 2" in done.stderr
    doc = load_result(stage / "conc-64")
    assert doc["status"] == "error" and doc["stage"] == "readiness"
    print(f"never ready: exit after {elapsed:.1f} s")


def _interrupt_mid_eval(engine: FakeEngine, env: dict[str, str], answered: int) -> float:
    """Start the hook, SIGTERM it once `answered` questions were answered; seconds to exit."""
    process = start_hook(env, "--limit", "40")
    try:
        assert engine.wait_until(
            lambda e: sum(1 for r in e.requests if r.status == 200) > answered, timeout=120
        ), "the eval never got going"
        process.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        process.wait(timeout=30)
        return time.monotonic() - sent
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()


@pytest.mark.loopback
def test_sigterm_mid_eval_stages_an_aborted_result_with_the_samples_done(tmp_path):
    stage = tmp_path / "stage"
    behaviour = EngineBehaviour(max_model_len=4096, latency_s=0.2, max_concurrency=2)
    with FakeEngine(behaviour) as engine:
        took = _interrupt_mid_eval(engine, hook_env(engine.url, stage, CONC="2"), answered=8)
    assert took < 10
    doc = load_result(stage / "conc-2")
    assert doc["status"] == "aborted" and doc["stage"] == "eval" and doc["exit_code"] == 6
    samples = load_samples(stage / "conc-2")
    journal = (stage / "conc-2" / "journal.jsonl").read_text().splitlines()[1:]
    # Every answer received before the signal: at least those the engine sent well before it.
    assert len(samples) == len(journal) >= 5
    assert doc["eval"]["requests"]["completed"] == len(samples)
    assert all(s["response"] and s["question"] and s["target"] for s in samples)
    assert json.loads((stage / "hook.json").read_text())["runs"][0]["status"] == "aborted"


@pytest.mark.loopback
def test_resume_continues_without_asking_again(tmp_path):
    behaviour = EngineBehaviour(max_model_len=4096, latency_s=0.1, max_concurrency=2, accuracy=0.7)
    with FakeEngine(behaviour) as engine:
        questions = list(engine.behaviour.docs())
        # The reference: an uninterrupted run.
        reference = tmp_path / "reference"
        assert run_hook(hook_env(engine.url, reference, CONC="2"), "--limit", "40").returncode == 1

        stage = tmp_path / "stage"
        env = hook_env(engine.url, stage, CONC="2")
        engine.clear()
        _interrupt_mid_eval(engine, env, answered=10)
        journal = (stage / "conc-2" / "journal.jsonl").read_text().splitlines()[1:]
        kept = {questions[json.loads(line)["doc_id"]] for line in journal}
        engine.clear()
        resumed = run_hook(env, "--limit", "40", "--resume")
        asked_again = {r.question for r in engine.requests if not r.body.get("stream")}
    assert len(kept) >= 5
    assert resumed.returncode == 1, resumed.stderr  # 70% right: below 0.90, as the reference
    assert not kept & asked_again  # answered questions were not sent again
    assert len(asked_again) == 40 - len(kept)
    doc = load_result(stage / "conc-2")
    assert doc["eval"]["requests"]["resumed"] == len(kept)
    ours = load_samples(stage / "conc-2")
    want = load_samples(reference / "conc-2")
    assert ours == want


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed")
@pytest.mark.loopback
def test_hook_script_is_shellcheck_clean():
    shellcheck = shutil.which("shellcheck") or "shellcheck"
    done = subprocess.run([shellcheck, str(HOOK)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout


@pytest.mark.loopback
def test_hook_artifacts_pass_verify_with_an_expected_set(tmp_path, cli):
    """Only MODEL, ISL, OSL, the router URL and the decode's server arguments: the staged
    evidence is what `evalgate verify --expect` accepts (full GSM8K, so the score decides)."""
    stage = tmp_path / "stage"
    with FakeEngine(EngineBehaviour(max_model_len=4096)) as engine:
        done = run_hook(hook_env(engine.url, stage, CONC="32"))
    assert done.returncode == 0, done.stderr
    manifest = tmp_path / "expected.json"
    manifest.write_text(
        json.dumps([{"model": "fake-model", "isl": 1024, "osl": 512, "concurrency": 32}])
    )
    verified = cli("verify", str(stage), "--expect", str(manifest), "--no-github")
    assert verified.code == 0, verified.text
    missing = cli("verify", str(stage), "--expect", "2", "--no-github")
    assert missing.code == 1


# A refusal changes nothing (RELIABILITY.md): every file in the folder before a refused command
# is byte for byte the same after it; only the lock file may be created or hold the refusing
# process's id.


@pytest.mark.loopback
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


@pytest.mark.loopback
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


@pytest.mark.loopback
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


@pytest.mark.loopback
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


@pytest.mark.loopback
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


# The habits a user brings, each as its own process: the hook without --output-dir keeps its
# staging folder and its refusal, and says what is missing before the folder's state.


@pytest.mark.loopback
def test_the_hook_without_output_dir_keeps_its_staging_folder_and_its_refusal(tmp_path):
    with FakeEngine(EngineBehaviour(max_model_len=4096)) as engine:
        args = ["hook", *run_args(engine.url, None, *SHORT)[1:]]
        first = run_subprocess(*args, cwd=tmp_path)
        assert first.returncode == 0, first.stderr
        stage = tmp_path / "evalgate-results"
        before = checksums(stage)
        again = run_subprocess(*args, cwd=tmp_path)
    assert load_result(stage / "conc-8")["status"] == "pass"
    assert again.returncode == 2
    assert "conc-8/result.json already holds a result (status pass)" in again.stderr
    assert checksums(stage) == before


@pytest.mark.loopback
def test_the_hook_says_what_is_missing_before_a_staged_result(tmp_path):
    with FakeEngine(EngineBehaviour(max_model_len=4096)) as engine:
        args = run_args(engine.url, tmp_path / "stage", *SHORT)
        first = run_subprocess("hook", *args[1:])
    assert first.returncode == 0, first.stderr
    before = checksums(tmp_path / "stage")
    done = run_subprocess("hook", "--output-dir", str(tmp_path / "stage"), "--num-concurrent", "8")
    assert done.returncode == 2
    assert "UsageError: Missing --base-url, --model: set the flag(s)" in done.stderr
    assert checksums(tmp_path / "stage") == before


# Any concurrency list is distinct positive integers or a usage error.


@QUICK
@given(st.text(max_size=30))
@pytest.mark.unit
def test_a_concurrency_list_is_distinct_positive_integers_or_a_usage_error(text):
    try:
        values = parse_concurrencies(text)
    except UsageError as exc:
        assert "--concurrency" in exc.message
        return
    assert values and all(v >= 1 for v in values)
    assert len(set(values)) == len(values)


# The hook's concurrency list: a value out of range refused once, the largest (65,535) run.


@pytest.mark.parametrize(
    ("command", "environment", "says"),
    [
        (
            ["hook", "--concurrency", "1" + "0" * 20],
            {},
            "100,000,000,000,000,000,000 is out of range",
        ),
        (["hook"], {"EVAL_CONC": "16 65536"}, "65,536 is out of range: give 1 to 65,535"),
        (["hook"], {"CONC": "\u0661\u0666"}, "ASCII digits 0-9"),
    ],
    ids=["--concurrency 10^20", "EVAL_CONC past 65,535", "CONC in Arabic-Indic digits"],
)
@pytest.mark.loopback
def test_the_hook_refuses_a_concurrency_out_of_range_once(
    engine, tmp_path, command, environment, says
):
    out = tmp_path / "stage"
    name, *flags = command
    done = run_subprocess(*run_args(engine.url, out, *flags, command=name), env=environment)

    assert done.returncode == 2, done.stderr
    assert done.stderr.count("UsageError: Invalid settings: --concurrency") == 1, done.stderr
    assert says in done.stderr
    assert "please report" not in done.stderr
    assert engine.log == [] and not out.exists()


@pytest.mark.loopback
def test_the_hook_takes_the_largest_concurrency(engine, tmp_path):
    """65,535 in flight (at most, over 3 questions): the hook runs it and passes."""
    out = tmp_path / "stage"
    limits = {"concurrency": 65535, "limit": 3, "min_samples": 0}
    done = run_subprocess(*run_args(engine.url, out, command="hook", **limits))

    assert done.returncode == 0, done.stderr
    assert "conc 65535: PASS" in done.stdout
    assert load_result(out / "conc-65535")["labels"]["concurrency"] == 65_535
