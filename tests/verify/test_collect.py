"""`evalgate verify` over trees it does not control: run folders that are symbolic links (and
links that loop or lead nowhere), a run killed outright, a run still holding its folder's lock,
and files nested deeper than any decoder goes. Each runs the CLI as its own process, as CI does.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from msgspec import structs

from evalgate.errors import UsageError
from evalgate.evidence.artifacts import NOT_A_RESULT
from evalgate.schemas import validation_errors
from evalgate.verify import collect, sweep
from tests.conftest import (
    error_lines,
    load_result,
    run_args,
    run_subprocess,
    start_subprocess,
    thresholds_json,
)
from tests.fakeengine import EngineBehaviour, FakeEngine, Fault
from tests.tasks.task_files import GPQA_TASK as GPQA
from tests.verify.conftest import GPQA_KEY, GSM8K_KEY, LABELS, QUESTIONS
from tests.verify.sweeps import (
    lm_eval_doc,
    meta_env,
    parsed_thresholds,
    result_doc,
    sweep_of,
    write_harness,
    write_result,
)

HOLD_LOCK = (
    "import fcntl, os, sys\n"
    "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)\n"
    "fcntl.flock(fd, fcntl.LOCK_EX)\n"
    "os.write(fd, str(os.getpid()).encode())\n"
    "print('locked', flush=True)\n"
    "sys.stdin.read()\n"
)


"""A process that holds an output folder's lock as a live run does, until its stdin closes."""


def verify(*args: str) -> subprocess.CompletedProcess[str]:
    return run_subprocess("verify", *args, "--no-github")


@pytest.mark.loopback
def test_run_folders_that_are_links_are_followed_and_each_folder_searched_once(tmp_path):
    store, sweep = tmp_path / "store", tmp_path / "sweep"
    sweep.mkdir()
    for conc in (4, 8):
        write_result(store / f"run-{conc}", conc=conc)
        (sweep / f"conc{conc}").symlink_to(store / f"run-{conc}", target_is_directory=True)
    (sweep / "up").symlink_to(tmp_path, target_is_directory=True)  # a loop, above the sweep
    (sweep / "gone").symlink_to(tmp_path / "nowhere", target_is_directory=True)

    done = verify(str(sweep))

    assert done.returncode == 0, done.stdout + done.stderr
    assert "evalgate verify: PASS (exit 0): 2 results for 2 configs: 2 pass" in done.stdout
    assert f"ignored: {sweep}/up/sweep is the folder {sweep} again" in done.stdout
    assert f"ignored: {sweep}/up/store/run-4 is the folder {sweep}/conc4 again" in done.stdout
    assert (
        f"ignored: {sweep}/gone is a symbolic link to {tmp_path}/nowhere, which cannot be "
        "reached: not searched"
    ) in done.stdout


@pytest.mark.loopback
def test_a_run_killed_outright_is_interrupted_at_the_stage_it_last_recorded(tmp_path):
    out = tmp_path / "run"
    with FakeEngine(EngineBehaviour(max_model_len=4096)) as engine:
        engine.inject(Fault("hang", nth=range(2, 100_000)))  # the probe answers, the eval hangs
        args = run_args(engine.url, out)
        run = start_subprocess(*args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            assert engine.wait_until(lambda e: e.total >= 2, timeout=120), "the eval never began"
        finally:
            run.kill()  # SIGKILL: the run writes nothing more
            run.wait()
            engine.release()
    recorded = load_result(out)
    assert (recorded["status"], recorded["stage"]) == ("running", "eval")

    done = verify(str(out))

    assert done.returncode == 1, done.stdout + done.stderr
    assert "ERROR" in done.stdout
    assert re.search(
        r"run interrupted: its result\.json still says running, last recorded at stage eval: "
        r"the run was killed, or its result was collected before it finished",
        done.stdout,
    ), done.stdout


@pytest.mark.loopback
def test_a_run_that_holds_its_folders_lock_is_still_running_not_interrupted(tmp_path):
    write_result(tmp_path / "run", status="running", stage="settings", reason="in progress")
    lock = tmp_path / "run" / ".evalgate.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(lock)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        held = verify(str(tmp_path))
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait()
    released = verify(str(tmp_path))  # the lock file stays behind, held by nobody

    assert held.returncode == released.returncode == 1
    assert f"still running (pid {holder.pid}, which holds the folder's lock" in held.stdout
    assert "interrupted" not in held.stdout
    assert "run interrupted: its result.json still says running" in released.stdout


@pytest.mark.loopback
def test_a_lock_file_beside_a_finished_result_is_not_read_as_anything(tmp_path):
    write_result(tmp_path / "run")
    (tmp_path / "run" / ".evalgate.lock").write_text("4242\n")

    done = verify(str(tmp_path))

    assert done.returncode == 0, done.stdout + done.stderr
    assert "evalgate verify: PASS (exit 0): 1 results for 1 configs: 1 pass" in done.stdout
    assert "ignored" not in done.stdout and ".evalgate.lock" not in done.stdout


def _nested(path: Path, depth: int = 10**6) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("[" * depth + "]" * depth)
    return path


@pytest.mark.loopback
def test_files_nested_a_million_deep_are_malformed_and_the_rest_is_reported(tmp_path):
    write_result(tmp_path / "good")
    deep_result = _nested(tmp_path / "deep" / "result.json")
    deep_meta = _nested(tmp_path / "harness" / "meta_env.json")
    (tmp_path / "harness" / "results_2026.json").write_text(json.dumps(lm_eval_doc()))

    done = verify(str(tmp_path))

    assert done.returncode == 1, done.stdout + done.stderr
    assert f"MALFORMED    {deep_result}\n" in done.stdout
    assert f"MALFORMED    {deep_meta}\n" in done.stdout
    assert "the 1 lm-eval result(s) it describes go unchecked" in done.stdout
    assert "PASS          dsr1 b200 vllm fp8 isl=1024 osl=1024 conc=64" in done.stdout
    assert (
        "evalgate verify: FAIL (exit 1): 3 results for 1 configs: 1 pass, 2 malformed"
    ) in done.stdout


@pytest.mark.loopback
def test_a_report_through_a_linked_run_folder_is_refused_not_written_over_its_result(tmp_path):
    result = write_result(tmp_path / "store" / "run-4", conc=4)
    before = result.read_bytes()
    (tmp_path / "sweep").mkdir()
    (tmp_path / "sweep" / "conc4").symlink_to(result.parent, target_is_directory=True)
    through = tmp_path / "sweep" / "conc4" / "result.json"

    done = verify(str(tmp_path / "sweep"), "--json", str(through))

    assert done.returncode == 2, done.stdout + done.stderr
    assert f"--json {through} takes the name of a run's evidence" in done.stderr
    assert result.read_bytes() == before


@pytest.mark.loopback
def test_a_folder_that_cannot_be_listed_is_malformed_and_the_rest_is_reported(
    tmp_path, monkeypatch, cli
):
    """Root reads every folder, so the refusal is made by the one call that lists folders."""
    write_result(tmp_path / "good")
    write_result(tmp_path / "locked-away" / "run", conc=8)
    real = os.scandir

    def scandir(path: Any) -> Any:
        if str(path) == str(tmp_path / "locked-away"):
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    done = cli("verify", str(tmp_path), "--no-github")

    assert done.code == 1, done.text
    assert f"MALFORMED    {tmp_path}/locked-away\n" in done.out
    assert (
        f"Cannot list {tmp_path}/locked-away: Permission denied; the results in it go unchecked"
    ) in done.out
    assert "2 results for 1 configs: 1 pass, 1 malformed" in done.out


# The advice fits the mistake: a thresholds key one or two edits from a task (the results' own
# tasks among them) is refused naming the task it means; one that is no misspelling is kept.


@pytest.mark.loopback
@pytest.mark.parametrize(
    ("where", "entry", "key", "how"),
    [
        ("models", {"fake-model": {"gsm8K": 0.97}}, "gsm8K", "only in case"),
        ("models", {"fake-model": {"gsm8": 0.97}}, "gsm8", "by 1 edit(s), case aside"),
        (
            "overrides",
            [{"match": {"hardware": "b200"}, "thresholds": {"GSM8k ": 0.97}}],
            "GSM8k ",
            "by 1 edit(s), case aside",
        ),
    ],
)
def test_a_misspelt_task_key_is_refused_naming_the_task_it_means(tmp_path, where, entry, key, how):
    """It was read as a floor for no task: the run fell back to the 0.90 default and passed."""
    path = thresholds_json(tmp_path, {"default": {"gsm8k": 0.9}, where: entry})
    with FakeEngine() as engine:
        done = run_subprocess(
            *run_args(engine.url, tmp_path / "run", limit=10, min_samples=0),
            *("--thresholds", str(path), "--hardware", "b200"),
        )
        sent = engine.total

    assert done.returncode == 2, done.stderr
    [line] = error_lines(done.stderr, "ThresholdsError")
    inside = "$.models.fake-model" if where == "models" else "$.overrides[0].thresholds"
    assert line.startswith(
        f"ThresholdsError: {path}: {inside}.{key} names no known task, but differs from the "
        f"task 'gsm8k' {how}: "
    ), line
    assert f'Rename the key "gsm8k"; or, if {json.dumps(key)} is a task of its own' in line
    assert sent == 0  # refused before the endpoint was asked anything
    assert load_result(tmp_path / "run")["stage"] == "thresholds"


@pytest.mark.loopback
@pytest.mark.parametrize(
    ("data", "floor", "matched"),
    [
        (
            {"default": {"gsm8k": 0.5}, "models": {"fake-model": {"mmlu": 0.7, "gsm8k": 0.6}}},
            0.6,
            "model:fake-model",
        ),
        (
            {"default": {"gsm8k": 0.5, "gsm8": 0.7}, "models": {"fake-model": {"gsm8": 0.8}}},
            0.5,
            "default",
        ),
    ],
    ids=["a key far from every task", "a near key that default names: a task of its own"],
)
def test_a_key_that_is_no_misspelling_is_kept(tmp_path, data, floor, matched):
    path = thresholds_json(tmp_path, data)
    with FakeEngine() as engine:
        done = run_subprocess(
            *run_args(engine.url, tmp_path / "run", limit=10, min_samples=0),
            "--thresholds",
            str(path),
        )

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].endswith(f">= threshold {floor:.4f} ({matched})")


@pytest.mark.loopback
def test_verify_knows_the_tasks_of_the_results_it_gates(tmp_path):
    """A key two edits from a result's task (and far from every built-in task) is a misspelling
    of that task; nothing is written when it is refused."""
    run = tmp_path / "sweep" / "run"
    with FakeEngine() as engine:
        done = run_subprocess(*run_args(engine.url, run, limit=10, min_samples=0))
    assert done.returncode == 0, done.stderr
    [task] = {score["task"] for score in load_result(run)["scores"]}
    assert task == "gsm8k_evalgate_chat"
    misspelt = thresholds_json(
        tmp_path, {"default": {"gsm8k": 0.9}, "models": {"fake-model": {"gsm8k_evalgate_caht": 1}}}
    )
    report = tmp_path / "verdict.json"
    refused = run_subprocess(
        "verify", str(tmp_path / "sweep"), "--thresholds", str(misspelt), "--min-samples", "0",
        "--no-github", "--json", str(report),
    )  # fmt: skip
    spelt = thresholds_json(
        tmp_path, {"default": {"gsm8k": 0.9}, "models": {"fake-model": {task: 1}}}
    )
    kept = run_subprocess(
        "verify", str(tmp_path / "sweep"), "--thresholds", str(spelt), "--min-samples", "0",
        "--no-github",
    )  # fmt: skip

    assert refused.returncode == 2, refused.stdout + refused.stderr
    [line] = error_lines(refused.stderr, "ThresholdsError")
    assert (
        f"$.models.fake-model.gsm8k_evalgate_caht names no known task, but differs from the task "
        f"'{task}' by 2 edit(s), case aside" in line
    )
    assert refused.stdout == "" and not report.exists()
    assert kept.returncode == 0, kept.stdout + kept.stderr  # 1.0 of 10 right: at its floor


# A config's identity includes its task: a GSM8K run and a GPQA-diamond run of one model, hardware
# and topology are two results in verify's table, in --expect, in --baseline pairing and in every
# report (docs/verify.md, "How a config and a run are identified"); verdicts are
# evalgate.verdict/2, and verdict/1's schema stays, frozen, for the documents already written.


def sweep_with_an_errored_gpqa_run(task_sweeps: dict[str, Path], root: Path) -> Path:
    """Today's passing GSM8K run, and a GPQA-diamond run of the same config that stops before
    its eval: no --dataset-dir, so it never reaches the engine and records no eval."""
    sweep = root / "sweep"
    shutil.copytree(task_sweeps["today"] / "gsm8k", sweep / "gsm8k")
    with FakeEngine(EngineBehaviour(max_model_len=4096)) as engine:
        args = run_args(engine.url, sweep / "gpqa", *LABELS, "--task", GPQA)
        done = run_subprocess(*args, "--limit", str(QUESTIONS))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--dataset-dir" in done.stderr
    return sweep


def verify_sweep(sweep: Path, sweeps: dict[str, Path], tmp_path: Path) -> tuple[int, str, dict]:
    """verify one sweep; (exit code, stdout and stderr, the verdict document)."""
    report = tmp_path / "verdict.json"
    done = run_subprocess(
        "verify", str(sweep), "--thresholds", str(sweeps["thresholds"]), "--json", str(report)
    )
    return done.returncode, done.stdout + done.stderr, json.loads(report.read_text())


@pytest.mark.loopback
def test_a_run_stopped_before_its_eval_is_a_result_of_the_task_asked_for(task_sweeps, tmp_path):
    sweep = sweep_with_an_errored_gpqa_run(task_sweeps, tmp_path)

    code, out, document = verify_sweep(sweep, task_sweeps, tmp_path)

    assert code == 1, out  # the error, and only it
    assert "DUPLICATE" not in out
    assert "2 results for 2 configs: 1 pass, 1 error" in out
    rows = [re.match(r"(PASS|ERROR) +(.+?)  ", line) for line in out.splitlines()]
    assert [row.groups() for row in rows if row] == [("PASS", GSM8K_KEY), ("ERROR", GPQA_KEY)]
    assert sorted((e["key"], e["task"], e["outcome"]) for e in document["entries"]) == [
        (GSM8K_KEY, "gsm8k", "pass"),
        (GPQA_KEY, GPQA, "error"),
    ]
    written = load_result(sweep / "gpqa")
    assert (written["status"], written["eval"], written["task"]) == ("error", None, GPQA)


@pytest.mark.loopback
def test_a_result_written_before_results_named_their_task_is_read_as_before(task_sweeps, tmp_path):
    """result.json without its task (every evalgate before 0.2.0): the eval's task, and with no
    eval GSM8K, as always; so beside a GSM8K run of its config it is a duplicate."""
    sweep = sweep_with_an_errored_gpqa_run(task_sweeps, tmp_path)
    path = sweep / "gpqa" / "result.json"
    older = json.loads(path.read_text())
    older.pop("task", None)
    path.write_text(json.dumps(older))
    assert validation_errors("result", older) == []

    code, out, document = verify_sweep(sweep, task_sweeps, tmp_path)

    assert code == 1, out
    assert "DUPLICATE" in out
    assert {e["task"] for e in document["entries"] if e["source"] is not None} == {"gsm8k"}


# verify collects a sweep's results (evalgate's and the harness's), each with its labels.


@pytest.mark.unit
@pytest.mark.parametrize("status", ["pass", "fail", "error", "aborted", "running"])
def test_result_factory_is_schema_valid(status):
    assert validation_errors("result", result_doc(status=status)) == []


@pytest.mark.unit
def test_a_run_folder_with_runs_below_it_counts_each_once(tmp_path):
    sweep_of(tmp_path / "sweep", 8)
    write_result(tmp_path)  # the root is a run's folder, with runs in the folders below
    out = collect.collect([str(tmp_path)])
    assert len(out.found) == 8 and len(out.malformed) == 1  # the root's run, and 7 of the 8


@pytest.mark.unit
def test_collect_reads_an_evalgate_result(tmp_path):
    write_result(tmp_path / "a", kv="fp8", topology={"tp": 8, "dp_attention": False})
    out = collect.collect([str(tmp_path)])
    assert out.malformed == [] and out.empty == []
    [item] = out.found
    assert item.source == "evalgate"
    assert item.model == "deepseek-ai/DeepSeek-R1-0528"
    assert structs.asdict(item.labels) == {
        "model_prefix": "dsr1",
        "hardware": "b200",
        "framework": "vllm",
        "precision": "fp8",
        "kv_cache_dtype": "fp8",
        "isl": 1024,
        "osl": 1024,
        "concurrency": 64,
        "topology": {"tp": 8, "dp_attention": False},
    }
    assert [(s.filter, s.value, s.n) for s in item.scores] == [
        ("strict-match", 0.95, 1319),
        ("flexible-extract", 0.955, 1319),
    ]


@pytest.mark.unit
def test_collect_a_nonexistent_path_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="does not exist"):
        collect.collect([str(tmp_path / "nope")])


@pytest.mark.unit
def test_collect_an_empty_folder_is_reported_empty(tmp_path):
    out = collect.collect([str(tmp_path)])
    assert out.found == [] and out.malformed == [] and out.empty == [str(tmp_path)]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("{not json", "is not valid JSON (line 1 column 2"),
        ("", "is not valid JSON"),
        (b"\xff\xfe{}", "is not UTF-8 text"),
        ('{"schema": "evalgate.result/1"}', f"{NOT_A_RESULT}: $: "),
        ("[]", f"{NOT_A_RESULT}: $: Expected `object`, got `array`"),
    ],
)
def test_collect_reports_a_malformed_result_with_path_and_reason(tmp_path, content, reason):
    path = tmp_path / "run" / "result.json"
    path.parent.mkdir()
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    out = collect.collect([str(tmp_path)])
    assert out.found == []
    [note] = out.malformed
    assert note.path == str(path)
    assert note.reason.startswith(str(path))
    assert reason in note.reason


@pytest.mark.unit
def test_collect_names_the_bad_field_of_a_schema_invalid_result(tmp_path):
    doc = result_doc()
    doc["scores"][0]["value"] = 1.5
    del doc["labels"]
    (tmp_path / "result.json").write_text(json.dumps(doc))
    [note] = collect.collect([str(tmp_path)]).malformed
    assert "$.scores[0].value: Expected `float` <= 1.0" in note.reason  # the first met
    doc["scores"][0]["value"] = 0.5
    (tmp_path / "result.json").write_text(json.dumps(doc))
    [note] = collect.collect([str(tmp_path)]).malformed
    assert "$: Object missing required field `labels`" in note.reason


@pytest.mark.unit
def test_collect_reads_a_harness_eval_with_its_metadata(tmp_path):
    write_harness(
        tmp_path / "eval_gptoss_conc32", meta_env(spec_decoding="mtp", kv_cache_dtype="fp8")
    )
    out = collect.collect([str(tmp_path)])
    assert out.malformed == []
    [item] = out.found
    assert item.source == "lm-eval"
    assert item.status is None
    assert item.model == "openai/gpt-oss-120b"
    assert structs.asdict(item.labels) == {
        "model_prefix": "gptoss",
        "hardware": "mi355x",
        "framework": "sglang",
        "precision": "fp4",
        "kv_cache_dtype": "fp8",
        "isl": 1024,
        "osl": 8192,
        "concurrency": 32,
        "topology": {"tp": 4, "ep": 1, "dp_attention": False, "spec_decoding": "mtp"},
    }
    assert [(s.task, s.filter, s.value, s.n) for s in item.scores] == [
        ("gsm8k", "strict-match", 0.95, 1319),
        ("gsm8k", "flexible-extract", 0.955, 1319),
    ]
    assert item.scores[0].stderr == pytest.approx(0.006003, abs=1e-6)  # as lm-eval wrote it


@pytest.mark.unit
def test_collect_reads_multinode_topology_and_unknown_labels(tmp_path):
    meta = meta_env(
        is_multinode=True,
        precision="unknown",
        infmax_model_prefix="unknown",
        prefill_tp=4,
        prefill_num_workers=2,
        decode_tp=8,
        decode_num_workers=1,
        decode_dp_attention="true",
        prefill_pp=2,
    )
    write_harness(tmp_path, meta)
    [item] = collect.collect([str(tmp_path)]).found
    assert item.labels.precision is None
    assert item.labels.model_prefix is None
    assert item.labels.topology == {
        "prefill_tp": 4,
        "prefill_ep": 1,
        "prefill_dp_attention": False,
        "prefill_num_workers": 2,
        "prefill_pp": 2,
        "decode_tp": 8,
        "decode_ep": 1,
        "decode_dp_attention": True,
        "decode_num_workers": 1,
    }


@pytest.mark.unit
def test_collect_finds_lm_eval_output_nested_under_the_model_name(tmp_path):
    write_harness(
        tmp_path / "job",
        results={"openai__gpt-oss-120b/results_2026-05-01T10-00-00.json": lm_eval_doc()},
    )
    [item] = collect.collect([str(tmp_path)]).found
    assert item.path.endswith("openai__gpt-oss-120b/results_2026-05-01T10-00-00.json")


@pytest.mark.unit
@pytest.mark.parametrize(
    ("meta", "results", "reasons"),
    [
        (meta_env(), {}, ["meta_env.json has no lm-eval results*.json beside it"]),
        (
            meta_env(eval_exit_code=1),
            {"results_x.json": lm_eval_doc()},
            ["the harness recorded eval_exit_code = 1"],
        ),
        (meta_env(eval_exit_code=3), {}, ["the harness recorded eval_exit_code = 3"]),
    ],
)
def test_collect_turns_a_skipped_or_failed_harness_eval_into_an_errored_run(
    tmp_path, meta, results, reasons
):
    write_harness(tmp_path, meta, results)
    out = collect.collect([str(tmp_path)])
    assert [item.status for item in out.found] == ["error"] * len(reasons)
    for item, reason in zip(out.found, reasons, strict=True):
        assert reason in str(item.reason)
        assert item.labels.concurrency == 32


@pytest.mark.unit
def test_collect_expands_a_harness_batch_by_concurrency(tmp_path):
    meta = meta_env(
        conc=4,
        eval_concs=[4, 16, 64, 128],
        completed_eval_concs=[4, 16],
        failed_eval_concs=[64],
        eval_exit_code=1,
    )
    write_harness(
        tmp_path,
        meta,
        {
            "results_t_conc4.json": lm_eval_doc(),
            "results_t_conc16.json": lm_eval_doc(0.93, 0.94),
            "results_t_conc64.json": lm_eval_doc(),
            "results_t_conc256.json": lm_eval_doc(),
            "results_t.json": lm_eval_doc(),
        },
    )
    out = collect.collect([str(tmp_path)])
    by_conc = {item.labels.concurrency: item for item in out.found}
    assert sorted(by_conc) == [4, 16, 64, 128, 256]
    assert by_conc[4].status is None and by_conc[16].scores[0].value == 0.93
    assert by_conc[64].status == "error" and "failed_eval_concs" in str(by_conc[64].reason)
    assert by_conc[64].path.endswith("results_t_conc64.json")
    assert by_conc[128].status == "error"
    assert "no results*_conc128.json was staged" in str(by_conc[128].reason)
    assert by_conc[256].status is None  # not asked for: --expect decides whether it is wanted
    [note] = out.malformed
    assert note.path.endswith("results_t.json") and "no _conc<N> suffix" in note.reason


@pytest.mark.unit
@pytest.mark.parametrize(
    ("meta", "reason"),
    [
        ([1, 2], "is not a JSON object but list"),
        (meta_env(conc="lots"), "conc is 'lots', not an integer"),
        (meta_env(eval_concs=[4, "8"]), "eval_concs is [4, '8'], not a list of positive integers"),
        (meta_env(model="", infmax_model_prefix="unknown"), "neither model nor model_prefix"),
    ],
)
def test_collect_reports_a_malformed_meta_env(tmp_path, meta, reason):
    write_harness(tmp_path, meta)
    out = collect.collect([str(tmp_path)])
    assert out.found == []
    [note] = out.malformed
    assert note.path == str(tmp_path / "meta_env.json")
    assert reason in note.reason
    assert "the 1 lm-eval result(s) it describes go unchecked" in note.reason


@pytest.mark.unit
@pytest.mark.parametrize(
    ("doc", "reason"),
    [
        ({"lm_eval_version": "0.4.13"}, 'has no "results" object'),
        ({**lm_eval_doc(), "n-samples": {}}, "n-samples.gsm8k.effective is None"),
        (
            {**lm_eval_doc(), "results": {"gsm8k": {"exact_match,strict-match": "0.9"}}},
            "results.gsm8k.exact_match,strict-match is '0.9', not a number in [0, 1]",
        ),
    ],
)
def test_collect_reports_a_malformed_lm_eval_file(tmp_path, doc, reason):
    write_harness(tmp_path, results={"results_x.json": doc})
    out = collect.collect([str(tmp_path)])
    [note] = out.malformed
    assert note.path == str(tmp_path / "results_x.json") and reason in note.reason


@pytest.mark.unit
def test_collect_lm_eval_without_metadata_is_malformed(tmp_path):
    (tmp_path / "results_x.json").write_text(json.dumps(lm_eval_doc()))
    [note] = collect.collect([str(tmp_path)]).malformed
    assert "is an lm-eval result with no meta_env.json beside it" in note.reason


@pytest.mark.unit
def test_collect_lists_a_results_file_that_is_not_lm_eval(tmp_path):
    write_harness(tmp_path)
    (tmp_path / "results_summary.json").write_text('{"rows": []}')
    out = collect.collect([str(tmp_path)])
    assert len(out.found) == 1
    [note] = out.ignored
    assert note.reason.endswith("is not an lm-eval result (no lm_eval_version)")


@pytest.mark.unit
def test_collect_does_not_count_an_evalgate_runs_own_lm_eval_output(tmp_path):
    write_result(tmp_path / "run")
    (tmp_path / "run" / "raw").mkdir()
    (tmp_path / "run" / "raw" / "results_x.json").write_text(json.dumps(lm_eval_doc()))
    (tmp_path / "run" / "meta_env.json").write_text(json.dumps(meta_env()))
    out = collect.collect([str(tmp_path)])
    assert [item.source for item in out.found] == ["evalgate"]
    assert out.malformed == [] and out.ignored == []


@pytest.mark.unit
def test_collect_takes_result_files_named_on_the_command_line(tmp_path):
    path = write_result(tmp_path / "a")
    other = tmp_path / "b.json"
    other.write_text(json.dumps(result_doc(conc=8)))
    out = collect.collect([str(path), str(other)])
    assert [item.labels.concurrency for item in out.found] == [64, 8]


@pytest.mark.unit
@pytest.mark.parametrize("name", ["meta_env.json", "results_2026.json"])
def test_collect_refuses_a_harness_file_on_its_own(tmp_path, name):
    (tmp_path / name).write_text("{}")
    with pytest.raises(UsageError, match=r"pass the folder that holds meta_env\.json"):
        collect.collect([str(tmp_path / name)])


@pytest.mark.unit
def test_collect_reads_an_evalgate_hook_staging_folder(tmp_path):
    """`evalgate hook` stages conc-<N>/ (result.json, meta_env.json) and hook.json."""
    stage = tmp_path / "stage"
    hook_meta = {
        "framework": "vllm",
        "precision": "fp8",
        "model": "deepseek-ai/DeepSeek-R1-0528",
        "model_prefix": "dsr1",
        "hardware": "b200",
        "isl": 1024,
        "osl": 1024,
        "kv_cache_dtype": None,
        "is_multinode": False,
    }
    write_result(stage / "conc-4", conc=4)
    (stage / "conc-4" / "meta_env.json").write_text(json.dumps({**hook_meta, "conc": 4}))
    (stage / "conc-8").mkdir()  # stopped before its result.json was written
    (stage / "conc-8" / "meta_env.json").write_text(json.dumps({**hook_meta, "conc": 8}))
    (stage / "hook.json").write_text(
        json.dumps(
            {
                "concurrencies": [4, 8, 16],
                "completed": [4],
                "stopped": "error at stage eval: boom",
                "runs": [
                    {
                        "concurrency": 4,
                        "status": "pass",
                        "exit_code": 0,
                        "stage": "done",
                        "reason": "ok",
                        "result": "conc-4/result.json",
                    },
                    {
                        "concurrency": 8,
                        "status": "error",
                        "exit_code": 4,
                        "stage": "eval",
                        "reason": "boom",
                        "result": None,
                    },
                    {
                        "concurrency": 16,
                        "status": "not run",
                        "reason": "not run: an earlier run stopped the hook "
                        "(error at stage eval: boom)",
                    },
                ],
            }
        )
    )
    out = collect.collect([str(stage)])
    assert out.malformed == []
    by_conc = {item.labels.concurrency: item for item in out.found}
    assert sorted(by_conc) == [4, 8, 16]
    assert by_conc[4].status == "pass" and by_conc[4].source == "evalgate"
    assert by_conc[8].status == "error"
    assert "meta_env.json has no lm-eval results" in str(by_conc[8].reason)
    assert by_conc[16].status == "skipped"
    assert by_conc[16].labels.model_prefix == "dsr1" and by_conc[16].model == by_conc[4].model
    entry = sweep.Rule(parsed_thresholds()).gate(by_conc[16], "k")
    assert entry.outcome == "error"
    assert entry.reason == (
        "run skipped: not run: an earlier run stopped the hook (error at stage eval: boom)"
    )


@pytest.mark.unit
def test_collect_reports_a_malformed_hook_summary(tmp_path):
    write_result(tmp_path / "conc-4")
    (tmp_path / "hook.json").write_text('{"runs": 3}')
    [note] = collect.collect([str(tmp_path)]).malformed
    assert note.reason.startswith(
        f"{tmp_path / 'hook.json'} is not an evalgate hook summary: "
        "$.runs: Expected `array`, got `int`"
    )


@pytest.mark.unit
def test_collect_searches_overlapping_paths_once(tmp_path):
    path = write_result(tmp_path / "a" / "run")
    out = collect.collect([str(tmp_path), str(tmp_path / "a"), str(path), str(tmp_path)])
    assert [item.path for item in out.found] == [str(path)]
    assert out.empty == []
