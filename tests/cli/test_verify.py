"""evalgate/cli/verify.py: `evalgate verify` as a user runs it: what it says of an empty or
mixed folder, its usage errors (exit 2), thresholds from the environment, GitHub's job summary
and outputs (and --no-github), --quiet.

Every result here is a real file in tmp_path (tests/verify/sweeps.py), and the command runs
in-process with only its own subcommand built (`verify_only`).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from evalgate.errors import ExitCode
from evalgate.schemas import validation_errors
from tests.conftest import run_subprocess
from tests.verify.sweeps import lm_eval_doc, meta_env, write_harness, write_result

pytestmark = pytest.mark.usefixtures("verify_only")


@pytest.mark.unit
def test_an_empty_folder_fails_and_says_so(tmp_path, cli):
    code, out, _ = cli("verify", str(tmp_path))
    assert code == ExitCode.FAIL
    assert f"no eval results found under {tmp_path}" in out
    assert out.rstrip().endswith(f"FAIL (exit 1): no eval results found under {tmp_path}")


@pytest.mark.unit
def test_one_empty_path_among_others_fails(tmp_path, cli):
    write_result(tmp_path / "a")
    (tmp_path / "b").mkdir()
    code, out, _ = cli("verify", str(tmp_path / "a"), str(tmp_path / "b"))
    assert code == ExitCode.FAIL
    assert f"no eval results found under {tmp_path / 'b'}" in out


@pytest.mark.unit
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{tmp}/nope"], "UsageError: {tmp}/nope does not exist."),
        (
            ["{tmp}", "--thresholds", "{tmp}/missing.json"],
            "ThresholdsError: Cannot read thresholds file {tmp}/missing.json",
        ),
        (["{tmp}", "--expect", "{tmp}/missing.json"], "UsageError: --expect: Cannot read "),
        (
            ["{tmp}", "--expect", "{tmp}/result.json"],
            "UsageError: --expect {tmp}/result.json is neither a count nor a manifest",
        ),
    ],
)
def test_usage_errors_exit_2(tmp_path, cli, args, message):
    write_result(tmp_path)
    code, _, err = cli("verify", *[a.format(tmp=tmp_path) for a in args])
    assert code == ExitCode.USAGE
    assert message.format(tmp=tmp_path) in err


@pytest.mark.unit
def test_a_bad_thresholds_file_exits_2(tmp_path, cli):
    write_result(tmp_path / "r")
    bad = tmp_path / "t.json"
    bad.write_text(json.dumps({"default": {"gsm8k": 1.5}}))
    code, _, err = cli("verify", str(tmp_path / "r"), "--thresholds", str(bad))
    assert code == ExitCode.USAGE
    assert "ThresholdsError: " in err and "is not a valid thresholds file" in err


@pytest.mark.unit
def test_bad_min_samples_is_a_usage_error(tmp_path, cli):
    code, _, err = cli("verify", tmp_path, "--min-samples", "-1")
    assert code == 2
    assert "-1 is out of range: give 0 to 2,147,483,647" in err


def mixed_tree(root: Path) -> dict[str, Path]:
    """One of everything the issue names: passing, failing, errored, malformed, harness."""
    paths = {
        "pass": write_result(root / "dsr1-conc64"),
        "fail": write_result(
            root / "dsr1-conc32",
            conc=32,
            scores=(0.86, 0.87),
            status="fail",
            reason="below threshold",
        ),
        "error": write_result(
            root / "dsr1-conc16",
            conc=16,
            status="error",
            stage="probe",
            reason="max_tokens=12288 cannot be greater than max_model_len=2048",
            error={"type": "ProbeError", "message": "rejected"},
        ),
    }
    bad = root / "dsr1-conc8" / "result.json"
    bad.parent.mkdir()
    bad.write_text('{"schema": "evalgate.result/1", "status": "pass"')
    paths["malformed"] = bad
    write_harness(
        root / "gptoss-batch",
        meta_env(conc=4, eval_concs=[4, 8], completed_eval_concs=[4, 8], failed_eval_concs=[]),
        {"results_2026_conc4.json": lm_eval_doc(), "results_2026_conc8.json": lm_eval_doc()},
    )
    paths["harness"] = root / "gptoss-batch" / "results_2026_conc4.json"
    return paths


@pytest.mark.unit
def test_a_mixed_tree_lists_everything_and_fails(tmp_path, cli, monkeypatch):
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    summary.write_text("earlier step\n")
    paths = mixed_tree(tmp_path / "artifacts")
    junit_path, json_path = tmp_path / "out" / "junit.xml", tmp_path / "out" / "verdict.json"
    code, out, err = cli(
        "verify", str(tmp_path / "artifacts"), "--junit", str(junit_path), "--json", str(json_path)
    )
    assert code == ExitCode.FAIL, err

    # the terminal: every item, with its reason (and its path when it is a problem)
    assert "PASS          dsr1 b200 vllm fp8 isl=1024 osl=1024 conc=64" in out
    assert "FAIL          dsr1 b200 vllm fp8 isl=1024 osl=1024 conc=32" in out
    assert (
        "strict-match 0.8600 (95% CI 0.8402-0.8777, n=1319), flexible-extract 0.8700 "
        "(95% CI 0.8508-0.8871, n=1319) below threshold 0.9100 (prefix:dsr1)"
    ) in out
    assert (
        "run error in stage probe: max_tokens=12288 cannot be greater than "
        "max_model_len=2048 (ProbeError)"
    ) in out
    assert str(paths["error"]) in out
    assert f"{paths['malformed']} is not valid JSON" in out
    assert (
        "PASS          gptoss mi355x sglang fp4 isl=1024 osl=8192 conc=4 tp=4 ep=1 dpa=false" in out
    )
    assert (
        "evalgate verify: FAIL (exit 1): 6 results for 5 configs: 3 pass, 1 fail, "
        "1 error, 1 malformed"
    ) in out

    # GitHub: annotations on stdout, a markdown table appended to the job summary
    assert f"::error file={paths['fail']},title=evalgate verify fail%3A dsr1 b200 vllm fp8 " in out
    assert f"::error file={paths['malformed']}," in out
    assert out.count("::error ") == 3
    text = summary.read_text()
    assert text.startswith("earlier step\n### ❌ evalgate verify: FAIL\n")
    assert_markdown_tables(text)
    assert (
        "| ❌ fail | dsr1 b200 vllm fp8 isl=1024 osl=1024 conc=32 | 0.8600 ±0.0096 strict-match"
        in text
    )
    assert "<details><summary>3 passing</summary>" in text

    # JUnit: one testcase per config, the problems marked
    suite = ET.parse(junit_path).getroot()  # noqa: S314 - evalgate's own output
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert len(cases) == 6
    assert suite.get("tests") == "6" and suite.get("failures") == "1" and suite.get("errors") == "2"
    assert cases["dsr1 b200 vllm fp8 isl=1024 osl=1024 conc=32"].find("failure") is not None
    assert (
        cases["dsr1 b200 vllm fp8 isl=1024 osl=1024 conc=16"].find("error").get("type") == "error"
    )
    assert cases[str(paths["malformed"])].find("error").get("type") == "malformed"
    passing = cases["dsr1 b200 vllm fp8 isl=1024 osl=1024 conc=64"]
    assert passing.find("failure") is None and passing.find("error") is None
    assert passing.get("file") == str(paths["pass"])

    # the verdict document
    document = json.loads(json_path.read_text())
    assert validation_errors("verdict", document) == []
    assert document["verdict"] == "fail" and document["exit_code"] == 1
    assert document["counts"] == {
        "pass": 3,
        "fail": 1,
        "inconclusive": 0,
        "error": 1,
        "malformed": 1,
        "missing": 0,
        "unexpected": 0,
        "duplicate": 0,
        "empty": 0,
        "regression": 0,
        "expired": 0,
    }
    [failed] = [e for e in document["entries"] if e["outcome"] == "fail"]
    assert failed["checks"][0]["ci_low"] == pytest.approx(0.8402, abs=1e-4)
    assert failed["labels"]["concurrency"] == 32


def assert_markdown_tables(text: str) -> None:
    """Every table is a header, a separator and rows with as many cells as the header."""
    lines = text.splitlines()
    tables = [i for i, line in enumerate(lines) if line.startswith("|---")]
    assert tables
    for at in tables:
        width = lines[at - 1].count(" | ") + 1
        assert lines[at] == "|" + "---|" * width
        row = at + 1
        while row < len(lines) and lines[row].startswith("| "):
            cells = lines[row].replace("\\|", "").strip("|").split(" | ")
            assert len(cells) == width, lines[row]
            row += 1
        assert row > at + 1


@pytest.mark.unit
def test_thresholds_from_the_environment(tmp_path, cli, monkeypatch):
    write_result(tmp_path / "r", scores=(0.95, 0.95))
    strict = tmp_path / "strict.json"
    strict.write_text(json.dumps({"default": {"gsm8k": 0.99}}))
    monkeypatch.setenv("EVALGATE_THRESHOLDS", str(strict))
    code, out, _ = cli("verify", str(tmp_path / "r"))
    assert code == ExitCode.FAIL
    assert "below threshold 0.9900 (default)" in out


@pytest.mark.unit
def test_no_github_output_when_turned_off(tmp_path, cli, monkeypatch):
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    write_result(tmp_path / "r", scores=(0.5, 0.5))
    code, out, _ = cli("verify", str(tmp_path / "r"), "--no-github")
    assert code == ExitCode.FAIL
    assert "::error" not in out and not summary.exists()


@pytest.mark.unit
def test_quiet_prints_problems_and_the_verdict_only(tmp_path, cli):
    write_result(tmp_path / "a", conc=4)
    write_result(tmp_path / "b", conc=8, scores=(0.5, 0.5))
    code, out, _ = cli("verify", str(tmp_path), "-q")
    assert code == ExitCode.FAIL
    assert "conc=4" not in out and "conc=8" in out and "RESULT" not in out


@pytest.mark.loopback
def test_a_job_summary_that_cannot_be_written_keeps_the_verdicts_exit_code(tmp_path):
    """GITHUB_STEP_SUMMARY on a full disk (/dev/full): the verdict printed is the exit code, and
    the verdict line, printed last, names the report it could not write."""
    write_result(tmp_path / "runs" / "a")
    env = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": "/dev/full"}

    done = run_subprocess(
        "verify", str(tmp_path / "runs"), "--json", str(tmp_path / "verdict.json"), env=env
    )

    assert done.returncode == ExitCode.PASS, done.stderr
    last = done.stdout.splitlines()[-1]
    assert last.startswith("evalgate verify: PASS (exit 0): ")
    assert last.endswith("; not written (see above): GITHUB_STEP_SUMMARY /dev/full")
    assert "ArtifactError: Cannot write /dev/full: No space left on device" in done.stderr
    assert json.loads((tmp_path / "verdict.json").read_text())["verdict"] == "pass"
