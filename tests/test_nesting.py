"""Deeply nested JSON is malformed wherever evalgate reads JSON (issue 25, item 2).

A file of a million nested brackets (or 5,000, or 150: past evalgate's bound of 100 levels but
under the interpreter's recursion limit) given as an input is exit 2 naming the file; met by
`verify` in a tree, it is MALFORMED and the rest of the tree is reported as usual. Before, each
was "InternalError ... please report" (exit 4), and verify reported nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import load_result, run_args, run_subprocess

DOCUMENTS = Path(__file__).parent / "evidence" / "data" / "documents"
DEPTHS = [150, 5_000, 1_000_000]
TOO_DEEP = "nests arrays and objects more than 100 levels deep"


def brackets(depth: int) -> str:
    return "[" * depth + "]" * depth


def inside(depth: int) -> str:
    """A document whose one value is nested `depth` deep (a config key, a threshold)."""
    return '{"default": ' + brackets(depth) + "}"


def good_run(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "result.json").write_text((DOCUMENTS / "result.json").read_text())
    return folder


@pytest.mark.unit
@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("shape", [brackets, inside])
def test_context_refuses_a_deep_model_config(cli, tmp_path, depth, shape):
    config = tmp_path / "config.json"
    config.write_text(shape(depth))

    done = cli("context", "--model-config", str(config), "--isl", "1024", "--osl", "512")

    assert done.code == 2
    assert f"ContextError: {config} " in done.err
    assert "InternalError" not in done.err


@pytest.mark.loopback
@pytest.mark.parametrize("depth", [5_000, 1_000_000])
def test_run_refuses_a_deep_model_config_and_records_why(cli, engine, tmp_path, depth):
    config, out = tmp_path / "config.json", tmp_path / "out"
    config.write_text(brackets(depth))
    done = cli(*run_args(engine.url, out, model_config=config, num_concurrent=None))

    assert done.code == 2
    assert f"ContextError: {config} " in done.err
    result = load_result(out)
    assert (result["status"], result["error"]["type"]) == ("error", "ContextError")


@pytest.mark.unit
@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("suffix", [".json", ".txt"])
def test_verify_refuses_deep_thresholds(cli, tmp_path, depth, suffix):
    good_run(tmp_path / "run")
    thresholds = tmp_path / f"thresholds{suffix}"
    thresholds.write_text(inside(depth))

    done = cli("verify", str(tmp_path / "run"), "--thresholds", str(thresholds))

    assert done.code == 2
    assert f"ThresholdsError: {thresholds} {TOO_DEEP}" in done.err


@pytest.mark.unit
@pytest.mark.parametrize("depth", [5_000, 1_000_000])
@pytest.mark.parametrize("where", ["result.json", "samples.jsonl"])
def test_compare_refuses_a_deep_run(cli, tmp_path, depth, where):
    base, cand = good_run(tmp_path / "a"), good_run(tmp_path / "b")
    for run in (base, cand):
        sample = json.loads((DOCUMENTS / "sample.json").read_text())
        (run / "samples.jsonl").write_text(json.dumps(sample) + "\n")
    (cand / where).write_text(brackets(depth) + "\n")

    done = cli("compare", str(base), str(cand))

    assert done.code == 2
    assert f"ArtifactError: {cand / where}" in done.err


def _deep_value(depth: int) -> str:
    """A valid result.json but for one value nested `depth` deep (chat_template_kwargs, which
    the contract leaves open)."""
    doc = json.loads((DOCUMENTS / "result.json").read_text())
    doc["eval"]["chat_template_kwargs"] = {"x": "@"}
    return json.dumps(doc).replace('"@"', brackets(depth))


@pytest.mark.loopback
def test_verify_reports_each_deep_file_malformed_and_the_rest_as_usual(tmp_path):
    tree, report = tmp_path / "tree", tmp_path / "verdict.json"
    good = good_run(tree / "good")
    deep = {
        tree / "deep" / "result.json": brackets(1_000_000),
        tree / "value" / "result.json": _deep_value(5_000),
        tree / "hooked" / "hook.json": brackets(5_000),
        tree / "harness" / "results_2026_conc4.json": brackets(1_000_000),
        tree / "staged" / "meta_env.json": inside(5_000),
    }
    for path, text in deep.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    hooked = good_run(tree / "hooked" / "conc4")

    done = run_subprocess("verify", str(tree), "--json", str(report))

    assert done.returncode == 1, done.stderr  # the malformed files fail the gate
    outcomes = {e["path"]: e["outcome"] for e in json.loads(report.read_text())["entries"]}
    assert outcomes[str(good / "result.json")] == "pass"
    assert outcomes[str(hooked / "result.json")] == "pass"
    for path in deep:
        assert outcomes[str(path)] == "malformed", path
    assert "InternalError" not in done.stderr


@pytest.mark.unit
@pytest.mark.parametrize("depth", [5_000, 1_000_000])
def test_verify_refuses_a_deep_expect_file(cli, tmp_path, depth):
    good_run(tmp_path / "run")
    manifest = tmp_path / "expect.json"
    manifest.write_text(brackets(depth))

    done = cli("verify", str(tmp_path / "run"), "--expect", str(manifest))

    assert done.code == 2
    assert f"UsageError: --expect: {manifest} {TOO_DEEP}" in done.err


@pytest.mark.loopback
@pytest.mark.parametrize("depth", [5_000, 1_000_000])
def test_run_refuses_a_deep_baseline_before_sending_anything(cli, engine, tmp_path, depth):
    baseline = good_run(tmp_path / "baseline")
    (baseline / "result.json").write_text(_deep_value(depth))
    done = cli(*run_args(engine.url, tmp_path / "out", baseline=baseline, num_concurrent=None))

    assert done.code == 2
    assert f"ArtifactError: {baseline / 'result.json'} " in done.err
    assert engine.requests == []


@pytest.mark.loopback
def test_run_into_a_folder_holding_a_deep_result_refuses_to_bury_it(cli, engine, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "result.json").write_text(brackets(1_000_000))
    done = cli(*run_args(engine.url, out, num_concurrent=None))

    assert done.code == 2
    assert "already holds a result (status unreadable)" in done.err
    assert (out / "result.json").read_text() == brackets(1_000_000)


@pytest.mark.loopback
@pytest.mark.parametrize("where", ["header", "answer"])
def test_resume_reads_a_journal_with_a_deep_line_as_far_as_it_is_json(cli, engine, tmp_path, where):
    out = tmp_path / "out"
    args = run_args(engine.url, out, limit=4, min_samples=0, num_concurrent=None)
    assert cli(*args).code == 0
    journal = (out / "journal.jsonl").read_text().splitlines()
    journal[0 if where == "header" else 2] = brackets(1_000_000)
    (out / "journal.jsonl").write_text("\n".join(journal) + "\n")
    result = load_result(out)
    (out / "result.json").write_text(json.dumps(result | {"status": "aborted"}))
    sent = len(engine.requests)

    done = cli(*args, "--resume")

    assert done.code == 0, done.err
    resumed = load_result(out)["eval"]["requests"]["resumed"]
    asked = len(engine.requests) - sent - 1  # the probe is sent again
    assert (resumed, asked) == ((0, 4) if where == "header" else (1, 3))
