"""gate.evaluate: the scores read from lm-eval's results, and the GSM8K reference answer."""

from __future__ import annotations

import json

import pytest

from evalgate.errors import UsageError
from evalgate.eval.lm_eval import extract_scores
from evalgate.eval.stage import check_acceptance, simulated_sources
from evalgate.evidence.model import Score
from evalgate.tasks.dataset import reference_answer
from tests.conftest import deadline, load_result, run_args, start_subprocess
from tests.fakeengine import EngineBehaviour, FakeEngine
from tests.folders import SMALL_RUN
from tests.tasks.task_files import PAYLOAD

GSM8K = {
    "alias": "gsm8k_evalgate_chat",
    "exact_match,strict-match": 0.75,
    "exact_match_stderr,strict-match": 0.0125,
    "exact_match,flexible-extract": 0.8,
    "exact_match_stderr,flexible-extract": 0.012,
}


TASK = "gsm8k_evalgate_chat"


def score(flt: str, value: float, stderr: float | None) -> Score:
    return Score(task=TASK, metric="exact_match", filter=flt, value=value, stderr=stderr, n=8)


EXTRACTIONS = [
    # (case, lm-eval's results, scores)
    (
        "both filters with their stderr",
        {TASK: GSM8K},
        [
            score("strict-match", 0.75, 0.0125),
            score("flexible-extract", 0.8, 0.012),
        ],
    ),
    (
        "stderr N/A (one question)",
        {TASK: {"exact_match,strict-match": 1, "exact_match_stderr,strict-match": "N/A"}},
        [score("strict-match", 1.0, None)],
    ),
    (
        "a non-numeric value is no score",
        {TASK: {"exact_match,strict-match": "N/A", "exact_match,flexible-extract": 0.5}},
        [score("flexible-extract", 0.5, None)],
    ),
    (
        "alias, name and keys without a filter are not scores",
        {TASK: {"alias": "x", "name,x": "y", "samples": 8, "exact_match,strict-match": 0.0}},
        [score("strict-match", 0.0, None)],
    ),
    (
        "a filter name with a comma keeps it",
        {TASK: {"exact_match,strict,match": 0.25}},
        [score("strict,match", 0.25, None)],
    ),
    ("another task's results are not this task's", {"gsm8k": GSM8K}, []),
    ("no results", {}, []),
]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("results", "scores"), [c[1:] for c in EXTRACTIONS], ids=[c[0] for c in EXTRACTIONS]
)
def test_extract_scores(results, scores):
    assert list(extract_scores(TASK, results, 8)) == scores


@pytest.mark.unit
@pytest.mark.parametrize(
    ("answer", "target"),
    [
        ("Natalia sold 48/2 = <<48/2=24>>24 clips.\n#### 72", "72"),
        ("It costs $1,200.\n#### 1,200", "1,200"),
        ("#### -3", "-3"),
        ("no marker", "no marker"),
        ("", ""),
    ],
)
def test_reference_answer(answer, target):
    assert reference_answer(answer) == target


# Simulated speculative acceptance (SGLANG_SIMULATE_ACC_LEN, --spec-decode-acceptance-length):
# the gate refuses, naming the source, unless --allow-simulated-acceptance, which the result
# records.

SOURCES = [
    # (case, SGLANG_SIMULATE_ACC_LEN, server arguments, sources found)
    ("nothing set", None, [], []),
    ("empty", "", [], []),
    ("zero", "0", [], []),
    ("zero as a float", " 0.0 ", [], []),
    (
        "an acceptance length",
        "2.49",
        [],
        ["SGLANG_SIMULATE_ACC_LEN='2.49' in the gate's environment (or --sglang-simulate-acc-len)"],
    ),
    (
        "anything else is taken as on",
        "yes",
        [],
        ["SGLANG_SIMULATE_ACC_LEN='yes' in the gate's environment (or --sglang-simulate-acc-len)"],
    ),
    (
        "ATOM's flag in a server-argument string",
        None,
        [("--tp 8 --spec-decode-acceptance-length 2.27 --port 8000", "DECODE_SERVER_CONFIG")],
        ["--spec-decode-acceptance-length '2.27' in DECODE_SERVER_CONFIG"],
    ),
    (
        "the flag written with = and underscores",
        None,
        [("--spec_decode_acceptance_length=3", "--server-config #1")],
        ["--spec-decode-acceptance-length '3' in --server-config #1"],
    ),
    ("a server-argument string without it", None, [("--tp 8 --max-model-len 4096", "x")], []),
]


@pytest.mark.loopback
@pytest.mark.parametrize(
    ("variable", "args", "expected"), [c[1:] for c in SOURCES], ids=[c[0] for c in SOURCES]
)
def test_simulated_sources(variable, args, expected):
    assert simulated_sources(variable, args) == expected


@pytest.mark.loopback
def test_check_refuses_names_every_source_or_records_the_override():
    assert check_acceptance([], allowed=False) is None
    with pytest.raises(UsageError) as caught:
        check_acceptance(["A", "B"], allowed=False)
    assert caught.value.message.startswith("Speculative decoding's acceptance is simulated (A; B)")
    assert caught.value.exit_code == 2
    note = check_acceptance(["A"], allowed=True)
    assert note is not None and note.startswith("speculative acceptance is simulated (A)")


@pytest.mark.loopback
def test_run_refuses_an_engine_the_job_says_simulates_acceptance(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("SGLANG_SIMULATE_ACC_LEN", "2.49")
    with FakeEngine(EngineBehaviour()) as engine:
        result = cli(*run_args(engine.url, tmp_path, "--limit", "10"))
        asked = engine.requests
    assert result.code == 2, result.text
    assert (
        "UsageError: Speculative decoding's acceptance is simulated (SGLANG_SIMULATE_ACC_LEN="
        "'2.49' in the gate's environment (or --sglang-simulate-acc-len))" in result.err
    )
    assert "--allow-simulated-acceptance" in result.err
    assert asked == []  # refused before the engine is asked anything
    doc = load_result(tmp_path)
    assert (doc["status"], doc["stage"], doc["exit_code"]) == ("error", "settings", 2)
    assert doc["reason"].startswith("Speculative decoding's acceptance is simulated")


@pytest.mark.loopback
def test_the_server_arguments_are_read_too(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("DECODE_SERVER_CONFIG", "--spec-decode-acceptance-length 2.27")
    with FakeEngine(EngineBehaviour()) as engine:
        result = cli(*run_args(engine.url, tmp_path, "--limit", "10"))
    assert result.code == 2, result.text
    assert "(--spec-decode-acceptance-length '2.27' in DECODE_SERVER_CONFIG)" in result.err


@pytest.mark.loopback
def test_a_zero_acceptance_length_is_no_simulation(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("SGLANG_SIMULATE_ACC_LEN", "0")
    with FakeEngine(EngineBehaviour()) as engine:
        result = cli(*run_args(engine.url, tmp_path, "--limit", "10", "--min-samples", "0"))
    assert result.code == 0, result.text
    assert not [w for w in load_result(tmp_path)["warnings"] if "simulated" in w]


@pytest.mark.loopback
def test_the_override_gates_anyway_and_the_result_says_so(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("SGLANG_SIMULATE_ACC_LEN", "2.49")
    with FakeEngine(EngineBehaviour()) as engine:
        result = cli(
            *run_args(engine.url, tmp_path, "--limit", "10", "--min-samples", "0"),
            "--allow-simulated-acceptance",
        )
    assert result.code == 0, result.text
    warnings = load_result(tmp_path)["warnings"]
    assert (
        "speculative acceptance is simulated (SGLANG_SIMULATE_ACC_LEN='2.49' in the gate's "
        "environment (or --sglang-simulate-acc-len)) and the gate ran anyway "
        "(--allow-simulated-acceptance): its scores say nothing about the model"
    ) in warnings


@pytest.mark.loopback
def test_the_hook_refuses_and_the_harness_files_say_every_concurrency_failed(
    cli, tmp_path, monkeypatch
):
    out = tmp_path / "job"
    for name, value in {
        "MODEL": "fake-model",
        "MODEL_PREFIX": "dsr1",
        "ISL": "1024",
        "OSL": "1024",
        "EVAL_CONC": "4 8",
        "SGLANG_SIMULATE_ACC_LEN": "1.79",
    }.items():
        monkeypatch.setenv(name, value)
    with FakeEngine(EngineBehaviour()) as engine:
        result = cli("hook", "--base-url", engine.url, "--layout", "harness", "--output-dir",
                     str(out))  # fmt: skip
        asked = engine.requests
    assert result.code == 2, result.text
    assert "SGLANG_SIMULATE_ACC_LEN='1.79'" in result.err
    assert asked == []
    meta = json.loads((out / "meta_env.json").read_text())
    assert meta["completed_eval_concs"] == [] and meta["failed_eval_concs"] == [4, 8]
    summary = json.loads((out / "evalgate" / "hook.json").read_text())
    assert [r["status"] for r in summary["runs"]] == ["error", "not run"]
    assert load_result(out / "evalgate" / "conc-4")["exit_code"] == 2


# A task file's templates are rendered by lm-eval in its sandbox.


@pytest.mark.loopback
def test_lm_evals_templates_are_sandboxed_for_a_payload_past_the_parser(tmp_path, monkeypatch):
    """The parser refuses the payload; were it to slip past, lm-eval renders it in jinja2's
    sandbox (the path `description` takes: ConfigurableTask.resolve_field)."""
    from jinja2.exceptions import SecurityError
    from lm_eval.api.task import ConfigurableTask

    from evalgate.eval.lm_eval import sandbox_templates

    monkeypatch.chdir(tmp_path)
    sandbox_templates()
    with pytest.raises(SecurityError):
        ConfigurableTask.resolve_field({"question": "q"}, PAYLOAD)
    assert not (tmp_path / "PWNED").exists()
    assert ConfigurableTask.resolve_field({"question": "q"}, "Q: {{question}}") == "Q: q"


# Hostile environments, end to end: signals, closed and full streams, full and read-only disks.


@pytest.mark.loopback
def test_a_run_outside_a_git_checkout_prints_no_git_error(engine, tmp_path):
    work = tmp_path / "not-a-checkout"
    work.mkdir()
    env = {"GIT_CEILING_DIRECTORIES": str(tmp_path)}
    with deadline(90, engine):
        child = start_subprocess(
            *run_args(engine.url, work / "run", **SMALL_RUN), cwd=work, env=env
        )
        stdout, stderr = child.communicate(timeout=80)

    assert child.returncode == 0, stderr
    assert "not a git repository" not in stderr
    assert "fatal:" not in stderr
    assert stdout.startswith("PASS: ")
