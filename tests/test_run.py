"""`evalgate run` end to end against a loopback engine that speaks vLLM 0.32's formats."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from evalgate.evidence.folder import LOCK_NAME
from tests.conftest import FAULT_RUN, load_result, load_samples, run_args, run_subprocess
from tests.fakeengine import (
    EngineBehaviour,
    FakeEngine,
    Fault,
    expected_right,
)
from tests.folders import RERUN_RUN, SHORT, checksums

pytestmark = pytest.mark.loopback


POINT = ["--min-samples", "0"]


"""Small runs decided on their point estimate, as the benchmark harness decides; the default
rule (an interval straddling the threshold below the full set is inconclusive) has its own
tests."""


def test_every_answer_right_passes(engine, cli, tmp_path):
    result = cli(*run_args(engine.url, tmp_path, *POINT, limit=50))
    assert result.code == 0, result.err
    assert result.out.startswith(
        "PASS: strict-match 1.0000 (95% CI 0.9287-1.0000, n=50), "
        "flexible-extract 1.0000 (95% CI 0.9287-1.0000, n=50) >= threshold 0.9000 (default)"
    )
    doc = load_result(tmp_path)
    assert doc["status"] == "pass" and doc["stage"] == "done" and doc["exit_code"] == 0
    assert {(s["filter"], s["value"], s["n"]) for s in doc["scores"]} == {
        ("strict-match", 1.0, 50),
        ("flexible-extract", 1.0, 50),
    }
    assert doc["probe"]["outcome"] == "ok"
    assert doc["context"]["served"] == [{"value": 4096, "source": "/v1/models of the endpoint"}]
    assert doc["context"]["prompt_tokens"]["source"] == "/tokenize"
    assert doc["eval"]["requests"] == {
        "total": 50,
        "completed": 50,
        "failed": 0,
        "retried": 0,
        "truncated": 0,
        "empty": 0,
        "resumed": 0,
        "from_reasoning": 0,
        "cut_while_thinking": 0,
        "inline_thinking": 0,
        "reasoning_tokens": None,
    }
    assert doc["endpoint"]["engine"] == {
        "owned_by": "vllm",
        "version": "0.32.0",
        "model_root": None,
    }
    samples = load_samples(tmp_path)
    assert [s["doc_id"] for s in samples] == list(range(50))
    assert all(s["filters"]["strict-match"]["correct"] for s in samples)
    # Every question was sent once, plus the probe's one request.
    assert len(engine.requests) == 51


def test_eighty_five_percent_fails_naming_metric_score_and_threshold(cli, tmp_path):
    with FakeEngine(EngineBehaviour(max_model_len=4096, accuracy=0.85)) as engine:
        result = cli(*run_args(engine.url, tmp_path, *POINT, limit=40))
    score = expected_right(40, 0.85) / 40
    assert result.code == 1
    assert result.out.startswith(f"FAIL: strict-match {score:.4f} (95% CI ")
    assert f"flexible-extract {score:.4f} (95% CI " in result.out
    assert "below threshold 0.9000 (default)" in result.out
    doc = load_result(tmp_path)
    assert doc["status"] == "fail" and doc["stage"] == "done"
    assert [c["passed"] for c in doc["checks"]] == [False, False]


def test_completions_api_uses_lm_evals_standard_prompt(engine, cli, tmp_path):
    result = cli(*run_args(engine.url, tmp_path, *POINT, limit=10, api="completions"))
    assert result.code == 0, result.err
    prompts = [r.body["prompt"] for r in engine.requests if r.path == "/v1/completions"]
    assert len(prompts) == 11  # ten questions and the probe
    assert all(p.startswith("Question: ") and p.endswith("\nAnswer:") for p in prompts)
    assert load_result(tmp_path)["eval"]["api"] == "completions"


def test_the_original_incident_fails_at_the_probe_in_seconds(tmp_path):
    """Served 9472, budget 12288 forced: vLLM rejects it. evalgate stops at the probe with
    vLLM's message instead of sending 1319 requests into a retry storm."""
    with FakeEngine(EngineBehaviour(max_model_len=9472)) as engine:
        started = time.monotonic()
        done = run_subprocess(
            *run_args(engine.url, tmp_path, *POINT, max_tokens=12288, isl=8192, osl=1024)
        )
        wall = time.monotonic() - started
        sent = len(engine.requests)
    assert done.returncode == 3, done.stderr
    assert (
        "max_tokens=12288 cannot be greater than max_model_len=9472. Please request fewer "
        "output tokens. (parameter=max_tokens, value=12288)"
    ) in done.stderr
    assert "Drop --max-tokens 12288" in done.stderr
    assert sent == 1  # the probe alone
    doc = load_result(tmp_path)
    assert doc["status"] == "error" and doc["stage"] == "probe" and doc["exit_code"] == 3
    assert doc["probe"]["outcome"] == "rejected" and doc["probe"]["status_code"] == 400
    assert doc["probe"]["engine_message"].startswith("max_tokens=12288 cannot be greater")
    # Reported, not asserted: the machines are shared. BENCHMARKS.md has the measured figures.
    print(f"incident: exit {done.returncode} after {wall:.2f} s wall")


def test_a_400_mid_eval_stops_at_once_with_what_was_done(cli, tmp_path):
    engine_behaviour = EngineBehaviour(max_model_len=4096)
    with FakeEngine(engine_behaviour) as engine:
        bad = list(engine.behaviour.docs())[25]
        engine.inject(
            Fault(
                "error",
                status=400,
                questions={bad},
                message="Sampling parameters are invalid for this request.",
            )
        )
        result = cli(*run_args(engine.url, tmp_path, *POINT, limit=60, num_concurrent=1))
        attempts = engine.attempts(bad)
        total = len(engine.requests)
    assert result.code == 4
    assert (
        "EvalFailedError: The engine rejected question 25 (HTTP 400: Sampling parameters are "
        "invalid for this request.)"
    ) in result.err
    assert attempts == 1  # no retry storm
    # The probe, questions 0-25 in order, and at most one already in flight: the rest never sent.
    assert total <= 28
    doc = load_result(tmp_path)
    assert doc["status"] == "error" and doc["stage"] == "eval" and doc["exit_code"] == 4
    assert doc["eval"]["requests"]["failed"] == 1
    assert doc["eval"]["requests"]["completed"] >= 25
    samples = [json.loads(line) for line in (tmp_path / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == doc["eval"]["requests"]["completed"] + 1
    rejected = [s for s in samples if s["error"]]
    assert [s["doc_id"] for s in rejected] == [25] and "HTTP 400" in rejected[0]["error"]


@pytest.mark.parametrize(
    ("default", "path"),
    [
        ('"0.9"', "$.default.gsm8k: '0.9' is not of type 'number'"),
        ("1.5", "$.default.gsm8k: 1.5 is greater than the maximum of 1"),
    ],
)
def test_bad_thresholds_are_a_usage_error_naming_the_json_path(
    engine, cli, tmp_path, default, path
):
    thresholds = tmp_path / "thresholds.json"
    thresholds.write_text(f'{{"default": {{"gsm8k": {default}}}}}')
    result = cli(*run_args(engine.url, tmp_path / "out", *POINT, limit=5, thresholds=thresholds))
    assert result.code == 2
    assert path in result.err
    assert len(engine.requests) == 0  # nothing was sent to the engine
    doc = load_result(tmp_path / "out")
    assert doc["status"] == "error" and doc["stage"] == "thresholds"


def test_an_existing_result_is_never_overwritten_silently(engine, cli, tmp_path):
    assert cli(*run_args(engine.url, tmp_path, *POINT, limit=5)).code == 0
    before = (tmp_path / "result.json").read_text()
    again = cli(*run_args(engine.url, tmp_path, *POINT, limit=5))
    assert again.code == 2
    assert "already holds a result (status pass)" in again.err
    assert (tmp_path / "result.json").read_text() == before
    assert cli(*run_args(engine.url, tmp_path, *POINT, "--overwrite", limit=5)).code == 0


def test_missing_model_is_a_usage_error_with_evidence(engine, cli, tmp_path):
    result = cli("run", "--base-url", engine.url, "--output-dir", str(tmp_path))
    assert result.code == 2
    assert "Missing --model" in result.err
    assert load_result(tmp_path)["stage"] == "settings"


def test_truncation_is_counted_and_can_be_gated(cli, tmp_path):
    with FakeEngine(EngineBehaviour(max_model_len=4096)) as engine:
        engine.inject(Fault("length", share=1.0, tokens=5))
        result = cli(*run_args(engine.url, tmp_path, *POINT, limit=10, max_truncated_rate="0.5"))
    assert result.code == 1
    assert "100.0% of answers were truncated or empty, over --max-truncated-rate 50.0%" in (
        result.out
    )
    doc = load_result(tmp_path)
    assert doc["eval"]["requests"]["truncated"] == 10
    assert any("10 answer(s) ended by length" in w for w in doc["warnings"])


# A refusal changes nothing (RELIABILITY.md): every file in the folder before a refused command
# is byte for byte the same after it; only the lock file may be created or hold the refusing
# process's id.


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


# The habits a user brings, each as its own process: a run by hand without --output-dir gets a
# folder of its own (as lm-eval gives each run its own files), --resume and --overwrite need a
# named folder, and what is missing is said before the folder's state.


OWN = re.compile(r"^output: (evalgate-results/run-\d{8}-\d{6}(?:-\d+)?) \(this run's own; ", re.M)


def made_folder(stderr: str) -> str:
    found = OWN.search(stderr)
    assert found is not None, stderr
    return found.group(1)


def test_each_run_by_hand_without_output_dir_gets_a_fresh_folder_of_its_own(tmp_path):
    with FakeEngine(EngineBehaviour(max_model_len=4096)) as engine:
        runs = [run_subprocess(*run_args(engine.url, None, *SHORT), cwd=tmp_path) for _ in "ab"]
    for done in runs:
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("PASS: ")
    first, second = (made_folder(done.stderr) for done in runs)
    assert first != second
    for done, folder in zip(runs, (first, second), strict=True):
        assert f"result: {folder}/result.json" in done.stderr
        assert load_result(tmp_path / folder)["status"] == "pass"
    assert sorted(p.name for p in (tmp_path / "evalgate-results").iterdir()) == sorted(
        Path(f).name for f in (first, second)
    )


@pytest.mark.parametrize("flag", ["--resume", "--overwrite"])
def test_resume_and_overwrite_need_a_named_folder(tmp_path, flag):
    with FakeEngine(EngineBehaviour(max_model_len=4096)) as engine:
        refused = run_subprocess(*run_args(engine.url, None, *SHORT, flag), cwd=tmp_path)
        assert engine.requests == []
        named = run_subprocess(
            *run_args(engine.url, None, *SHORT, flag),
            env={"EVALGATE_OUTPUT_DIR": str(tmp_path / "named")},
            cwd=tmp_path,
        )
    assert refused.returncode == 2
    assert (
        f"UsageError: {flag} (set by {flag}) needs --output-dir: without it, each run writes "
        "into a fresh folder of its own, where there is nothing to continue or replace. Name "
        "the run's folder with --output-dir, EVALGATE_OUTPUT_DIR or `output-dir:` in the config "
        "file." in refused.stderr
    )
    assert list(tmp_path.iterdir()) == [tmp_path / "named"]  # the refused run made nothing
    assert named.returncode == 0, named.stderr  # a named folder: nothing to continue, a new run
    assert load_result(tmp_path / "named")["status"] == "pass"


def test_a_run_with_no_arguments_says_what_is_missing_and_makes_no_folder(tmp_path):
    done = run_subprocess("run", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("UsageError: Missing --base-url, --model: set the flag(s)")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("named", [False, True])
def test_what_is_missing_is_said_before_a_folder_that_holds_a_result(tmp_path, named):
    """A folder with a finished run in it (the default one a run before 0.2.0 wrote, or one
    named): `run` without its endpoint says what is missing, not that the folder is taken;
    every file stays as it was."""
    folder = tmp_path / "evalgate-results"
    with FakeEngine(EngineBehaviour(max_model_len=4096)) as engine:
        first = run_subprocess(*run_args(engine.url, folder, *SHORT))
    assert first.returncode == 0, first.stderr
    before = checksums(folder)
    extra = ["--output-dir", str(folder)] if named else []
    done = run_subprocess("run", "--isl", "1024", *extra, cwd=tmp_path)
    assert done.returncode == 2
    assert "UsageError: Missing --base-url, --model: set the flag(s)" in done.stderr
    assert "already holds a result" not in done.stderr
    assert checksums(folder) == before
    assert sorted(p.name for p in folder.iterdir() if p.name != LOCK_NAME) == sorted(before)


# A thresholds file missing, bad or ambiguous stops the run before the engine is asked.


@pytest.mark.usefixtures("nineteen_of_twenty")
def test_thresholds_missing_is_a_usage_error(engine, tmp_path, cli):
    out = tmp_path / "run"
    missing = tmp_path / "nope.json"

    code, _, err = cli(*run_args(engine.url, out, thresholds=missing, **FAULT_RUN), within=30)

    assert code == 2
    assert f"ThresholdsError: Cannot read thresholds file {missing}: " in err
    assert "Pass --thresholds with an existing file" in err
    doc = load_result(out)
    assert (doc["status"], doc["stage"], doc["exit_code"]) == ("error", "thresholds", 2)
    assert engine.log == []  # the engine was never asked anything


@pytest.mark.usefixtures("nineteen_of_twenty")
@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('{"default": {"gsm8k": 0.9}', "is not valid JSON (line 1 column 27: Expecting ','"),
        ('{"default": {"gsm8k": "0.9"}}', "$.default.gsm8k: '0.9' is not of type 'number'"),
        ('{"default": {"gsm8k": 1.5}}', "$.default.gsm8k: 1.5 is greater than the maximum of 1"),
        ("[]", "is not a valid thresholds file"),
    ],
    ids=["cut JSON", "a string threshold", "a threshold over 1", "not an object"],
)
def test_a_bad_thresholds_file_is_a_usage_error(engine, tmp_path, cli, text, says):
    path = tmp_path / "thresholds.json"
    path.write_text(text, encoding="utf-8")
    out = tmp_path / "run"

    code, _, err = cli(*run_args(engine.url, out, thresholds=path, **FAULT_RUN), within=30)

    assert code == 2
    assert "ThresholdsError: " in err and says in err
    assert "stage: thresholds" in err
    assert load_result(out)["stage"] == "thresholds"
    assert engine.log == []


@pytest.mark.usefixtures("nineteen_of_twenty")
@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('{"default": {"gsm8k": 0.99, "gsm8k": 0.1}}', "repeats the key 'gsm8k'"),
        ('{"default": {"gsm8k": 0.9}, "models": {"": {"gsm8k": 0.1}}}', "should be non-empty"),
        ('{"default": {"gsm8k": NaN}}', "$.default.gsm8k is NaN"),
    ],
    ids=["a repeated key (the last would pass)", "an empty model key", "a NaN floor"],
)
def test_an_ambiguous_thresholds_file_stops_before_anything_runs(engine, tmp_path, cli, text, says):
    path = tmp_path / "thresholds.json"
    path.write_text(text, encoding="utf-8")
    out = tmp_path / "run"

    code, stdout, err = cli(*run_args(engine.url, out, thresholds=path, **FAULT_RUN), within=30)

    assert code == 2
    assert "ThresholdsError: " in err and says in err
    assert "PASS" not in stdout and "FAIL" not in stdout
    doc = load_result(out)
    assert (doc["status"], doc["stage"], doc["exit_code"]) == ("error", "thresholds", 2)
    assert doc["eval"] is None
    assert engine.log == []


@pytest.mark.usefixtures("nineteen_of_twenty")
def test_a_binary_thresholds_file_is_a_usage_error(engine, tmp_path, cli):
    path = tmp_path / "thresholds.json"
    path.write_bytes(b'{"default": {"gsm8k": 0.9}}\xff\xfe')

    code, _, err = cli(
        *run_args(engine.url, tmp_path / "run", thresholds=path, **FAULT_RUN), within=30
    )

    assert code == 2
    assert "ThresholdsError: " in err
