"""Simulated speculative acceptance (SGLANG_SIMULATE_ACC_LEN, --spec-decode-acceptance-length):
the gate refuses, naming the source, unless --allow-simulated-acceptance, which the result
records."""

from __future__ import annotations

import json

import pytest

from evalgate.errors import UsageError
from evalgate.eval.stage import check_acceptance, simulated_sources
from tests.conftest import load_result, run_args
from tests.fakeengine import EngineBehaviour, FakeEngine

pytestmark = pytest.mark.loopback

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


@pytest.mark.parametrize(
    ("variable", "args", "expected"), [c[1:] for c in SOURCES], ids=[c[0] for c in SOURCES]
)
def test_simulated_sources(variable, args, expected):
    assert simulated_sources(variable, args) == expected


def test_check_refuses_names_every_source_or_records_the_override():
    assert check_acceptance([], allowed=False) is None
    with pytest.raises(UsageError) as caught:
        check_acceptance(["A", "B"], allowed=False)
    assert caught.value.message.startswith("Speculative decoding's acceptance is simulated (A; B)")
    assert caught.value.exit_code == 2
    note = check_acceptance(["A"], allowed=True)
    assert note is not None and note.startswith("speculative acceptance is simulated (A)")


# -- the CLI ------------------------------------------------------------------------------------


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


def test_the_server_arguments_are_read_too(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("DECODE_SERVER_CONFIG", "--spec-decode-acceptance-length 2.27")
    with FakeEngine(EngineBehaviour()) as engine:
        result = cli(*run_args(engine.url, tmp_path, "--limit", "10"))
    assert result.code == 2, result.text
    assert "(--spec-decode-acceptance-length '2.27' in DECODE_SERVER_CONFIG)" in result.err


def test_a_zero_acceptance_length_is_no_simulation(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("SGLANG_SIMULATE_ACC_LEN", "0")
    with FakeEngine(EngineBehaviour()) as engine:
        result = cli(*run_args(engine.url, tmp_path, "--limit", "10", "--min-samples", "0"))
    assert result.code == 0, result.text
    assert not [w for w in load_result(tmp_path)["warnings"] if "simulated" in w]


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
