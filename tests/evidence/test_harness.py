"""`evalgate hook --layout harness`: the benchmark harness's workflow takes the evidence as its own.

The hook runs as the harness's job would run it, with only the job's own variables set; the
staged folder is read the way the harness reads it: its upload patterns, collector and validator
(tests/harness.py, REFERENCE.md §5).
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from evalgate.environment import job_environment
from evalgate.evidence import harness
from evalgate.schemas import validation_errors
from evalgate.settings.values import Settings
from tests.conftest import load_result
from tests.fakeengine import EngineBehaviour, FakeEngine
from tests.harness import (
    HARNESS_YAML,
    SERVED,
    as_uploaded,
    cli_hook,
    collect_rows,
    harness_hook,
    harness_thresholds,
    job_env,
    set_job,
    start_hook,
    uploaded,
    validate,
)

pytestmark = pytest.mark.loopback


def test_the_harness_takes_the_hooks_evidence_as_its_own(tmp_path):
    out = tmp_path / "job"
    behaviour = EngineBehaviour(model=SERVED, max_model_len=4096, accuracy=0.95)
    with FakeEngine(behaviour) as engine:
        code, output = harness_hook(job_env(engine.port), out)
        asked = {r.body["model"] for r in engine.requests if r.body}
    assert code == 0, output
    assert asked == {SERVED}  # MODEL_NAME is the served name, PORT the endpoint

    # The upload takes exactly the harness's files; evalgate's own stay out of its globs.
    names = uploaded(out)
    assert names[0] == "meta_env.json"
    assert [n for n in names if n.startswith("results")] == sorted(
        n for n in names if re.fullmatch(r"results_.+_conc(4|8)\.json", n)
    )
    assert len([n for n in names if re.fullmatch(r"samples_gsm8k_.+_conc(4|8)\.jsonl", n)]) == 2
    assert len(names) == 5
    for conc in (4, 8):
        assert load_result(out / "evalgate" / f"conc-{conc}")["status"] == "pass"

    rows = collect_rows(out)
    right = 38 / 40  # ceil(40 * 0.95) answers right
    assert sorted(r["conc"] for r in rows) == [4, 8]
    for row in rows:
        assert row == {
            "model_prefix": "dsr1",
            "hw": "B200",
            "framework": "sglang",
            "precision": "fp8",
            "isl": 1024,
            "osl": 1024,
            "conc": row["conc"],
            "prefill": (4, 4, True, 1),
            "decode": (8, 8, False, 2),
            "dp_attention": True,
            "task": "gsm8k",
            "strict": right,
            "flexible": right,
            "n": 40,
            "model": SERVED,
        }
    assert validate(out, harness_thresholds(), [4, 8]) == []

    # Each line of every samples file is an lm-eval sample record of that concurrency.
    for path in out.glob("samples_gsm8k_*.jsonl"):
        records = [json.loads(line) for line in path.read_text().splitlines()]
        assert len(records) == 80  # 40 questions, two filters
        assert {r["filter"] for r in records} == {"strict-match", "flexible-extract"}


def test_a_score_under_the_models_threshold_fails_both_gates(tmp_path):
    """36 of 40 (0.90) passes the harness's default 0.90 and the validator's 0.85 fallback,
    but not dsr1's 0.91: the task is named gsm8k and the prefix recorded, so it fails."""
    out = tmp_path / "job"
    with FakeEngine(EngineBehaviour(model=SERVED, max_model_len=4096, accuracy=0.9)) as engine:
        code, output = harness_hook(job_env(engine.port), out)
    assert code == 1, output
    failures = validate(out, harness_thresholds(), [4, 8])
    assert len(failures) == 4
    assert all("gsm8k exact_match," in f and "= 0.9000 (< 0.91)" in f for f in failures)
    meta = json.loads((out / "meta_env.json").read_text())
    assert meta["completed_eval_concs"] == [4, 8] and meta["failed_eval_concs"] == []


def test_meta_env_is_the_harness_own_for_the_jobs_variables(monkeypatch):
    """Key for key (and in order) what append_lm_eval_summary writes for this job: framework
    and precision from RESULT_FILENAME, EP from ENABLE_EP, workers from yD."""
    env = job_env(
        8888,
        IS_MULTINODE="true",
        SPEC_DECODING="mtp",
        RESULT_FILENAME="dsr1_1k1k_fp4_trt_tp8-ep8_dpa",
        PREFILL_EP="1",
        PREFILL_ENABLE_EP="true",
        yD="3",
    )
    for name in ("FRAMEWORK", "PRECISION", "DECODE_NUM_WORKERS"):
        del env[name]
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = Settings()
    meta = harness.meta_env(
        settings.labels,
        job_environment(env),
        [4, 8],
        [4],
        [8],
        served_model=settings.endpoint.served_model,
        isl=settings.context.isl,
        osl=settings.context.osl,
    )
    assert meta == {
        "is_multinode": True,
        "framework": "trt",
        "precision": "fp4",
        "spec_decoding": "mtp",
        "recipe_fingerprint": "",
        "tp": 4,
        "pp": 1,
        "dcp_size": 1,
        "pcp_size": 1,
        "conc": 4,
        "eval_concs": [4, 8],
        "completed_eval_concs": [4],
        "failed_eval_concs": [8],
        "ep": 4,
        "dp_attention": True,
        "prefill_tp": 4,
        "prefill_pp": 1,
        "prefill_dcp_size": 1,
        "prefill_pcp_size": 1,
        "prefill_ep": 4,
        "prefill_dp_attention": True,
        "prefill_num_workers": 1,
        "decode_tp": 8,
        "decode_pp": 1,
        "decode_dcp_size": 1,
        "decode_pcp_size": 1,
        "decode_ep": 8,
        "decode_dp_attention": False,
        "decode_num_workers": 3,
        "model": SERVED,
        "infmax_model_prefix": "dsr1",
        "hw": "b200",
        "isl": "1024",
        "osl": "1024",
    }


def test_a_rejected_probe_leaves_files_that_say_so(tmp_path):
    out = tmp_path / "job"
    with FakeEngine(EngineBehaviour(model=SERVED, max_model_len=4096)) as engine:
        code, output = harness_hook(job_env(engine.port), out, "--max-tokens", "12288")
    assert code == 3, output
    meta = json.loads((out / "meta_env.json").read_text())
    assert meta["completed_eval_concs"] == [] and meta["failed_eval_concs"] == [4, 8]
    assert uploaded(out) == ["meta_env.json"]  # the upload still has its file; no results
    failures = validate(out, harness_thresholds(), [4, 8])
    assert failures[0] == "batched eval failed for concurrency: 4, 8"
    assert load_result(out / "evalgate" / "conc-4")["stage"] == "probe"
    summary = json.loads((out / "evalgate" / "hook.json").read_text())
    assert [r["status"] for r in summary["runs"]] == ["error", "not run"]


def test_sigterm_mid_eval_is_recorded_as_a_failed_concurrency(tmp_path):
    out = tmp_path / "job"
    behaviour = EngineBehaviour(model=SERVED, max_model_len=4096, latency_s=0.2, max_concurrency=2)
    with FakeEngine(behaviour) as engine:
        process = start_hook(job_env(engine.port), out)
        try:
            assert engine.wait_until(
                lambda e: sum(1 for r in e.requests if r.status == 200) > 5, timeout=120
            ), "the eval never got going"
            process.send_signal(signal.SIGTERM)
            sent = time.monotonic()
            process.wait(timeout=30)
            took = time.monotonic() - sent
        finally:
            if process.poll() is None:
                process.kill()
            process.communicate()
    assert process.returncode == 6
    assert took < 10
    meta = json.loads((out / "meta_env.json").read_text())
    assert meta["eval_concs"] == [4, 8]
    assert meta["completed_eval_concs"] == [] and meta["failed_eval_concs"] == [4, 8]
    assert load_result(out / "evalgate" / "conc-4")["status"] == "aborted"
    assert not list(out.glob("results*.json"))


def verdicts(cli: Any, folder: Path, thresholds: Path) -> list[tuple[str, str]]:
    """(config key, outcome) of every result `evalgate verify` gates under `folder`."""
    written = folder.parent / f"{folder.name}.verdict.json"
    done = cli(
        "verify",
        str(folder),
        "--thresholds",
        str(thresholds),
        "--min-samples",
        "0",
        "--no-github",
        "--json",
        str(written),
    )
    doc = json.loads(written.read_text())
    assert validation_errors("verdict", doc) == []
    assert done.code == doc["exit_code"] == 1, done.text
    return sorted((e["key"], e["outcome"]) for e in doc["entries"])


def test_verify_names_and_gates_the_job_alike_from_either_files(tmp_path, cli):
    """The harness's files alone (as uploaded), evalgate's alone, and the staged folder with
    both: the same configs, the same verdicts, with the harness's own thresholds.yaml."""
    out = tmp_path / "job"
    with FakeEngine(EngineBehaviour(model=SERVED, max_model_len=4096, accuracy=0.9)) as engine:
        code, output = harness_hook(job_env(engine.port), out)
    assert code == 1, output  # 0.90: below dsr1's 0.91
    thresholds = tmp_path / "thresholds.yaml"
    thresholds.write_text(HARNESS_YAML)
    harness_only = as_uploaded(out, tmp_path / "harness")
    evalgate_only = tmp_path / "evalgate"
    shutil.copytree(out / "evalgate", evalgate_only)

    theirs = verdicts(cli, harness_only, thresholds)
    ours = verdicts(cli, evalgate_only, thresholds)
    both = verdicts(cli, out, thresholds)  # the harness's copies are not counted twice
    key = "dsr1 b200 sglang fp8 isl=1024 osl=1024 conc={} tp=4 ep=4 dpa=true"
    assert theirs == ours == both == [(key.format(4), "fail"), (key.format(8), "fail")]


# A single-node job's topology as the harness runs it today (InferenceX main of 2026-08-21): its
# EP_SIZE and DP_ATTENTION, written alike by both layouts (the harness writes ep 1 and
# dp_attention false there).

DEP8 = {"ISL": "1024", "OSL": "1024", "TP": "8", "EP_SIZE": "8", "DP_ATTENTION": "true"}


def test_a_single_node_job_is_labelled_by_its_ep_size_and_dp_attention(cli, tmp_path, monkeypatch):
    harness, ours = tmp_path / "harness", tmp_path / "evalgate"
    with FakeEngine(EngineBehaviour(model=SERVED, max_model_len=4096)) as engine:
        set_job(monkeypatch, engine.port, **DEP8)
        assert cli_hook(cli, harness, "--layout", "harness").code == 0
        assert cli_hook(cli, ours, "--min-samples", "0").code == 0
    theirs_meta = json.loads((harness / "meta_env.json").read_text())
    ours_meta = json.loads((ours / "conc-4" / "meta_env.json").read_text())
    for meta in (theirs_meta, ours_meta):
        assert (meta["tp"], meta["ep"], meta["dp_attention"]) == (8, 8, True)
        assert (meta["prefill_ep"], meta["decode_ep"], meta["decode_dp_attention"]) == (8, 8, True)
    topology = {"tp": 8, "ep": 8, "dp_attention": True}
    assert load_result(harness / "evalgate" / "conc-4")["labels"]["topology"] == topology
    assert load_result(ours / "conc-4")["labels"]["topology"] == topology
    [row] = collect_rows(harness)
    assert (row["dp_attention"], row["prefill"]) == (True, (8, 8, True, 1))

    # evalgate verify names the job alike from the harness's files and from either layout's.
    thresholds = tmp_path / "thresholds.yaml"
    thresholds.write_text(HARNESS_YAML)
    harness_only = as_uploaded(harness, tmp_path / "harness-files")
    keys = set()
    for folder in (harness_only, harness / "evalgate", ours):
        written = tmp_path / f"{folder.name}.json"
        done = cli("verify", str(folder), "--no-github", "--min-samples", "0", "--thresholds",
                   str(thresholds), "--json", str(written))  # fmt: skip
        assert done.code == 0, done.text
        keys |= {entry["key"] for entry in json.loads(written.read_text())["entries"]}
    assert keys == {"dsr1 b200 sglang fp8 isl=1024 osl=1024 conc=4 tp=8 ep=8 dpa=true"}


def test_without_ep_size_or_dp_attention_the_job_keeps_the_harness_defaults(
    cli, tmp_path, monkeypatch
):
    out = tmp_path / "job"
    with FakeEngine(EngineBehaviour(model=SERVED, max_model_len=4096)) as engine:
        set_job(monkeypatch, engine.port, ISL="1024", OSL="1024", TP="4")
        assert cli_hook(cli, out, "--min-samples", "0").code == 0
    meta = json.loads((out / "conc-4" / "meta_env.json").read_text())
    assert (meta["tp"], meta["ep"], meta["dp_attention"]) == (4, 1, False)
    topology = load_result(out / "conc-4")["labels"]["topology"]
    assert topology == {"tp": 4, "ep": 1, "dp_attention": False}
