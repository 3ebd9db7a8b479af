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

from tests.conftest import ROOT, load_result, load_samples
from tests.fakeengine import EngineBehaviour, FakeEngine, refused_url

pytestmark = pytest.mark.loopback


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
def test_hook_script_is_shellcheck_clean():
    shellcheck = shutil.which("shellcheck") or "shellcheck"
    done = subprocess.run([shellcheck, str(HOOK)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout


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
