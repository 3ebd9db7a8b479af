"""A run read back from its folder (compare/runs.py), and what two runs must share to be compared:
a run that cannot be read, or was measured another way, is refused naming why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalgate.evidence.artifacts import NOT_A_RESULT
from tests.compare.run_files import comparison_json, paired_outcomes, write_pair, write_run
from tests.conftest import deadline, load_result, run_args
from tests.fakeengine import EngineBehaviour, FakeEngine
from tests.folders import SMALL_RUN


@pytest.mark.loopback
def test_a_missing_baseline_fails_before_anything_is_sent(cli, tmp_path):
    with FakeEngine(EngineBehaviour()) as engine:
        ran = cli(
            *run_args(
                engine.url, tmp_path / "run", baseline=tmp_path / "nowhere", num_concurrent=16
            )
        )
        sent = len(engine.requests)

    assert ran.code == 2
    assert "is neither a run folder holding result.json nor a result file" in ran.err
    assert sent == 0


# evalgate compare: run folders built in tmp_path, driven through `evalgate.cli.main`.


@pytest.mark.unit
@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"max_tokens": 2048}, "max_tokens: baseline 1024, candidate 2048"),
        ({"temperature": 0.6}, "temperature: baseline 0.0, candidate 0.6"),
        ({"num_fewshot": 8}, "num_fewshot: baseline 5, candidate 8"),
        ({"fewshot_seed": 7}, "fewshot_seed: baseline 1234, candidate 7"),
        ({"api": "completions"}, 'api: baseline "chat", candidate "completions"'),
        ({"task": "gsm8k_evalgate_completions"}, "task: baseline"),
        ({"task_version": "2.0"}, 'task_version: baseline "3.0", candidate "2.0"'),
        ({"task_sha256": "b" * 64}, "task_sha256: baseline"),
        ({"limit": 1319}, "limit: baseline none, candidate 1319"),
        (
            {
                "dataset": {
                    "source": "dir",
                    "sha256": {"test": "f" * 64, "train": "17f347dc" + "0" * 56},
                }
            },
            "dataset.sha256.test: baseline",
        ),
    ],
)
def test_protocol_drift_is_refused_and_named(tmp_path, cli, change, named):
    base, cand = paired_outcomes(60)
    write_run(tmp_path / "a", base)
    write_run(tmp_path / "b", cand, **change)
    code, out, err = cli("compare", tmp_path / "a", tmp_path / "b")
    assert (code, out) == (2, "")
    assert err.startswith("UsageError: The runs ")
    assert "were not measured the same way" in err
    assert named in err
    assert "pass --allow-protocol-drift to compare them anyway." in err

    code, out, _ = cli("compare", tmp_path / "a", tmp_path / "b", "--allow-protocol-drift")
    assert code == 5
    assert "protocol differences allowed by --allow-protocol-drift:" in out
    assert named in out


@pytest.mark.unit
def test_question_set_drift(tmp_path, cli):
    base, cand = paired_outcomes(60)
    write_run(tmp_path / "a", base)
    write_run(tmp_path / "b", cand[:50], question_edits={3: "What is 2 + 2?"})
    code, _, err = cli("compare", tmp_path / "a", tmp_path / "b")
    assert code == 2
    assert (
        "question set: baseline 60 questions, candidate 50 questions (10 only in the "
        "baseline: doc_id 50, 51, 52, 53, 54, ...)" in err
    )
    assert "question text: baseline" in err
    assert "(differs for 1 shared questions: doc_id 3)" in err

    code, document = comparison_json(cli, tmp_path / "a", tmp_path / "b", "--allow-protocol-drift")
    assert document["excluded"]["unpaired"] == [3]
    assert [f["n"] for f in document["filters"]] == [49, 49]
    assert {d["field"] for d in document["protocol_drift"]} == {"question set", "question text"}


@pytest.mark.unit
def test_a_result_file_can_stand_for_its_folder(tmp_path, cli):
    write_pair(tmp_path, 1319)
    code, _, _ = cli("compare", tmp_path / "a" / "result.json", tmp_path / "b")
    assert code == 0


def _break(folder: Path, name: str, text: str | None) -> None:
    path = folder / name
    if text is None:
        path.unlink()
    else:
        path.write_text(text, encoding="utf-8")


@pytest.mark.unit
@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (
            ("samples.jsonl", None),
            "Cannot read {b}/samples.jsonl: No such file or directory. "
            "A comparison pairs the per-question records of samples.jsonl",
        ),
        (
            ("samples.jsonl", '{"doc_id": 0}\n'),
            "{b}/samples.jsonl line 1 is not a valid evalgate "
            "sample: $: Object missing required field `prompt_sha256`",
        ),
        (("samples.jsonl", "not json\n"), "{b}/samples.jsonl line 1 is not valid JSON"),
        (("result.json", "{}"), "{b}/result.json " + NOT_A_RESULT + ": "),
        (
            ("result.json", None),
            "{b} is neither a run folder holding result.json nor a result file",
        ),
    ],
)
def test_unusable_runs_are_usage_errors(tmp_path, cli, damage, message):
    base, cand = paired_outcomes(20)
    write_run(tmp_path / "a", base)
    b = write_run(tmp_path / "b", cand)
    _break(b, *damage)
    code, out, err = cli("compare", tmp_path / "a", b)
    assert (code, out) == (2, "")
    assert err.startswith("ArtifactError: " + message.format(b=b))


@pytest.mark.unit
def test_a_repeated_doc_id_is_refused(tmp_path, cli):
    base, cand = paired_outcomes(20)
    write_run(tmp_path / "a", base)
    b = write_run(tmp_path / "b", cand)
    lines = (b / "samples.jsonl").read_text(encoding="utf-8").splitlines()
    _break(b, "samples.jsonl", "\n".join([*lines, lines[0]]) + "\n")
    code, _, err = cli("compare", tmp_path / "a", b)
    assert code == 2
    assert f"ArtifactError: {b}/samples.jsonl line 21 repeats doc_id 0." in err


@pytest.mark.unit
def test_a_run_that_never_evaluated_is_refused(tmp_path, cli):
    base, cand = paired_outcomes(20)
    write_run(tmp_path / "a", base)
    b = write_run(tmp_path / "b", cand)
    result = load_result(b)
    result.update(eval=None, status="error", stage="readiness", reason="endpoint never ready")
    _break(b, "result.json", json.dumps(result))
    code, _, err = cli("compare", tmp_path / "a", b)
    assert code == 2
    assert (
        f"ArtifactError: {b}/result.json has no eval section: that run stopped at stage "
        "readiness (endpoint never ready) before evaluating."
    ) in err


# Hostile environments, end to end: signals, closed and full streams, full and read-only disks.


@pytest.mark.loopback
def test_a_missing_baseline_is_refused_before_the_eval(engine, tmp_path, cli):
    out = tmp_path / "run"
    with deadline(60, engine):
        code, _, err = cli(*run_args(engine.url, out, baseline=tmp_path / "nowhere", **SMALL_RUN))

    assert code == 2
    assert f"{tmp_path / 'nowhere'} is neither a run folder holding result.json" in err
    assert engine.total == 0  # no probe, no eval
    assert load_result(out)["status"] == "error"


@pytest.mark.loopback
@pytest.mark.parametrize(
    ("baseline_flags", "says"),
    [
        (["--api", "completions"], 'api: baseline "completions", this run "chat"'),
        (["--limit", "5"], "limit: baseline 5, this run 10"),
    ],
    ids=["another API", "another question count"],
)
def test_a_baseline_measured_differently_is_refused_before_the_eval(
    engine, tmp_path, cli, baseline_flags, says
):
    base = tmp_path / "base"
    with deadline(60, engine):
        assert cli(*run_args(engine.url, base, **SMALL_RUN), *baseline_flags)[0] == 0
    engine.clear()
    out = tmp_path / "run"

    with deadline(60, engine):
        code, _, err = cli(*run_args(engine.url, out, baseline=base, **SMALL_RUN))

    assert code == 2, err
    assert "was not measured the same way as this run" in err and says in err
    assert engine.total == 0
    assert load_result(out)["eval"] is None


@pytest.mark.loopback
@pytest.mark.parametrize("given", ["the folder", "its result.json"])
def test_a_baseline_that_is_the_output_folder_is_never_written_over(engine, tmp_path, cli, given):
    base = tmp_path / "base"
    with deadline(60, engine):
        assert cli(*run_args(engine.url, base, **SMALL_RUN))[0] == 0
    before = {f.name: f.read_bytes() for f in base.iterdir()}
    engine.clear()
    baseline = base if given == "the folder" else base / "result.json"

    with deadline(60, engine):
        code, _, err = cli(
            *run_args(engine.url, base, "--overwrite", baseline=baseline, **SMALL_RUN)
        )

    assert code == 2
    assert "the run would write over the run it compares with" in err
    assert {f.name: f.read_bytes() for f in base.iterdir()} == before
    assert engine.log == []
