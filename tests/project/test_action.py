"""The GitHub Action (action.yml), run step by step as a runner runs a composite action
(tests/project/action.py).

Most tests pass `install: false`, the action's own input for a runner that already has evalgate:
the install step then takes the evalgate on PATH, this checkout's (the test environment's), and
the verify step is what is tested. One test runs the install step as a user gets it: `pip
install "$GITHUB_ACTION_PATH"` into a virtualenv under runner.temp (from the registry: slower).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from evalgate.errors import ExitCode
from tests.conftest import ROOT, Sweep
from tests.project.action import ACTION, ActionRun, checkout_env, run_action
from tests.verify.sweeps import DSR1_CONFIG, answers, evalgate_sweep

pytestmark = pytest.mark.loopback


def on_sweep(sweep: Sweep, tmp: Path, inputs: dict[str, str]) -> ActionRun:
    """The action with `inputs`, the sweep's thresholds and this checkout's evalgate."""
    given = inputs | {"thresholds": str(sweep.thresholds), "install": "false"}
    return run_action(given, tmp, checkout_env())


def test_a_passing_sweep_passes_with_its_outputs_summary_and_reports(
    loopback_sweep: Sweep, tmp_path
):
    runs = loopback_sweep.runs
    results = f"{runs['pass']}\n{runs['pass_conc8']}\n"
    run = on_sweep(loopback_sweep, tmp_path, {"results": results, "expect": "2"})
    print(run.outputs)
    assert run.exit_code == 0, run.log
    reports = "evalgate-reports"
    assert run.outputs == {
        "verdict": "pass",
        "exit-code": "0",
        "json": f"{reports}/evalgate-verdict.json",
        "junit": f"{reports}/evalgate-junit.xml",
        "html": f"{reports}/evalgate-report.html",
    }
    verdict = json.loads((tmp_path / run.outputs["json"]).read_text())
    assert (verdict["verdict"], verdict["exit_code"], verdict["counts"]["pass"]) == ("pass", 0, 2)
    assert "<testsuite" in (tmp_path / run.outputs["junit"]).read_text()
    assert "<svg" in (tmp_path / run.outputs["html"]).read_text()
    assert "PASS" in run.summary and "b200" in run.summary
    assert "::error" not in run.log


def test_a_failing_sweep_fails_after_setting_its_outputs(loopback_sweep: Sweep, tmp_path):
    runs = loopback_sweep.runs
    inputs = {
        "results": f"{runs['pass']}\n{runs['fail']}",
        "waivers": "",  # empty: no waivers, no error
        "report-dir": "out/reports",
    }
    run = on_sweep(loopback_sweep, tmp_path, inputs)
    print(run.outputs)
    assert run.exit_code == 1, run.log
    assert run.outputs["verdict"] == "fail"
    assert run.outputs["exit-code"] == "1"
    assert run.outputs["json"] == "out/reports/evalgate-verdict.json"
    verdict = json.loads((tmp_path / run.outputs["json"]).read_text())
    assert (verdict["verdict"], verdict["counts"]["fail"]) == ("fail", 1)
    assert "FAIL" in run.summary
    assert re.search(r"^::error.*", run.log, flags=re.M), run.log


def test_each_baseline_line_is_its_own_baseline_and_args_pass_through(
    loopback_sweep: Sweep, tmp_path
):
    runs = loopback_sweep.runs
    inputs = {
        "results": f"{runs['pass']}\n{runs['pass_conc8']}",
        # another sweep's runs (a sweep is never its own baseline), a blank line between
        "baseline": f"{runs['pass_h100']}\n\n{runs['pass_h100_conc8']}\n",
        "args": "--max-drop\n0.5",
    }
    run = on_sweep(loopback_sweep, tmp_path, inputs)
    assert run.exit_code == 0, run.log
    verdict = json.loads((tmp_path / run.outputs["json"]).read_text())
    assert verdict["baseline"]["paths"] == [str(runs["pass_h100"]), str(runs["pass_h100_conc8"])]
    assert verdict["baseline"]["max_drop"] == 0.5


def test_an_input_is_never_run_as_code(tmp_path):
    planted = tmp_path / "planted"
    run = run_action(
        {"results": f'$(touch {planted})"; touch {planted}; "', "install": "false"},
        tmp_path,
        checkout_env(),
    )
    assert not planted.exists()
    assert (run.exit_code, run.outputs["verdict"], run.outputs["exit-code"]) == (2, "error", "2")


def test_a_missing_evalgate_with_install_false_says_what_to_do(tmp_path):
    run = run_action({"results": "x", "install": "false"}, tmp_path, {"PATH": "/usr/bin:/bin"})
    assert run.exit_code == 2
    assert "no evalgate is on PATH: install evalgate-bench first" in run.log


def test_the_install_step_installs_the_core_from_the_action_files(loopback_sweep: Sweep, tmp_path):
    """As a user's runner: the core from GITHUB_ACTION_PATH into a virtualenv of its own, then
    verify from there (the environment's evalgate is not on PATH)."""
    runs = loopback_sweep.runs
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EVALGATE_", "GITHUB_"))}
    env["PATH"] = os.pathsep.join(
        p for p in env["PATH"].split(os.pathsep) if not (Path(p) / "evalgate").exists()
    )
    run = run_action(
        {"results": str(runs["pass"]), "thresholds": str(loopback_sweep.thresholds)},
        tmp_path,
        env,
    )
    assert run.exit_code == 0, run.log
    assert run.outputs["verdict"] == "pass"
    venv = tmp_path / "runner-temp" / "evalgate-action"
    python = venv / "bin" / "python"
    missing = subprocess.run([python, "-c", "import lm_eval"], capture_output=True, check=False)
    assert missing.returncode == 1, "the action installs the core, without lm-eval"


def test_the_example_workflow_uses_the_action_and_keeps_its_reports():
    workflow = yaml.safe_load((ROOT / "examples" / "github-actions-verify.yml").read_text())
    steps = workflow["jobs"]["verify-evals"]["steps"]
    [gate] = [s for s in steps if str(s.get("uses", "")).split("@")[0].endswith("/evalgate")]
    assert set(gate["with"]) <= set(ACTION["inputs"]), "the example passes an unknown input"
    assert "results" in gate["with"]
    [upload] = [s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact")]
    assert upload["if"] == "always()"
    reports = ACTION["inputs"]["report-dir"]["default"]
    assert upload["with"]["path"].split() == [
        f"{reports}/evalgate-junit.xml",
        f"{reports}/evalgate-verdict.json",
        f"{reports}/evalgate-report.html",
    ]
    # and the paths the action says it wrote are those
    script = ACTION["runs"]["steps"][1]["run"]
    for name in ("evalgate-junit.xml", "evalgate-verdict.json", "evalgate-report.html"):
        assert f'"$REPORT_DIR/{name}"' in script


def test_each_step_script_is_shellcheck_clean(tmp_path):
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck is not installed (scripts/test installs it as root)")
    for number, step in enumerate(ACTION["runs"]["steps"]):
        script = tmp_path / f"step-{number}.sh"
        script.write_text("#!/usr/bin/env bash\n" + step["run"], encoding="utf-8")
        done = subprocess.run(
            [shellcheck, str(script)], capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, (step["name"], done.stdout)


# The documented example workflow runs through action.yml, against the baseline or not.


def example_inputs(step: dict[str, Any], green: bool) -> dict[str, str]:
    """The example's `with:` for the gate step, its `last-green != '' && 'A' || ''` choices
    made: A when a green sweep was found, else empty."""
    inputs = {}
    for name, value in step["with"].items():
        choice = re.fullmatch(
            r"\$\{\{ steps\.last-green\.outputs\.run-id != '' && '([^']*)' \|\| '' \}\}", str(value)
        )
        inputs[name] = (choice.group(1) if green else "") if choice else str(value)
    return inputs


@pytest.mark.parametrize("green", [True, False], ids=["against-last-green", "first-sweep"])
def test_the_example_workflow_runs(tmp_path, green):
    """The example's gate step through action.yml, as a runner runs it (run_action), with the
    evalgate of this checkout (`install: false`)."""
    yaml = pytest.importorskip("yaml")
    workflow = yaml.safe_load((ROOT / "examples" / "github-actions-verify.yml").read_text())
    [step] = [
        s for s in workflow["jobs"]["verify-evals"]["steps"] if s.get("name") == "Gate the sweep"
    ]
    inputs = example_inputs(step, green)
    assert inputs == {
        "results": "eval-artifacts",
        "thresholds": "thresholds.json",
        "expect": ".github/expected-evals.json",
        "baseline": "baseline-artifacts" if green else "",
        "waivers": ".github/eval-waivers.yaml" if green else "",
    }
    dsr1 = {"model_prefix": "dsr1", "hardware": "b200", "kv_cache_dtype": None}
    right = answers()
    for name in ("eval-artifacts", "baseline-artifacts"):  # full runs: answers to pair
        runs = dict.fromkeys((4, 8, 16, 32, 64), right)
        evalgate_sweep(tmp_path / name, name, runs, labels=dsr1)
    (tmp_path / ".github").mkdir()
    waiver = "- {config: dsr1 b200 vllm fp8 isl=1024 osl=1024 conc=4, reason: r, who: w, "
    (tmp_path / ".github" / "eval-waivers.yaml").write_text(waiver + "until: 2999-01-01}\n")
    manifest = [{**DSR1_CONFIG, "concurrency": [4, 8, 16, 32, 64]}]
    (tmp_path / ".github" / "expected-evals.json").write_text(json.dumps(manifest))
    (tmp_path / "thresholds.json").write_text(json.dumps({"default": {"gsm8k": 0.9}}))
    run = run_action(inputs | {"install": "false"}, tmp_path, checkout_env())
    assert run.exit_code == ExitCode.PASS, run.log
    assert run.outputs["verdict"] == "pass"
    against = "; against the baseline: 5 equivalent" if green else ""
    assert f"5 results for 5 configs: 5 pass{against}" in run.summary
    assert "```mermaid\nxychart-beta horizontal\n" in run.summary
    assert (tmp_path / run.outputs["junit"]).exists()
    verdict = json.loads((tmp_path / run.outputs["json"]).read_text())
    assert (verdict["baseline"] is not None) == green
    page = (tmp_path / run.outputs["html"]).read_text(encoding="utf-8")
    assert "<title>evalgate verify: PASS</title>" in page
    [upload] = [
        s
        for s in workflow["jobs"]["verify-evals"]["steps"]
        if "upload-artifact" in s.get("uses", "")
    ]
    assert upload["if"] == "always()"
    assert run.outputs["html"] in upload["with"]["path"].split()
