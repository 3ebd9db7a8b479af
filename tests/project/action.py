"""The GitHub Action (action.yml) run step by step as a runner runs a composite action: its
expressions evaluated (only inputs.*, github.action_path, runner.temp and steps.*.outputs.*),
each step's script run by bash with GITHUB_OUTPUT, GITHUB_STEP_SUMMARY, GITHUB_ENV and
GITHUB_ACTION_PATH set, what a step adds to GITHUB_ENV given to the steps after it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import ROOT

ACTION = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))


BASH = shutil.which("bash") or "/bin/bash"


EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


@dataclass
class ActionRun:
    """What a run of the action left: its outputs, job summary, log and exit code."""

    outputs: dict[str, str]
    summary: str
    log: str
    exit_code: int


def evaluate(text: str, context: dict[str, Any]) -> str:
    """`text` with each ${{ ... }} replaced; only the contexts the action may use are known."""

    def value(match: re.Match[str]) -> str:
        path = match.group(1)
        head, _, rest = path.partition(".")
        if head == "inputs":
            return str(context["inputs"][rest])
        if path in ("github.action_path", "runner.temp"):
            return str(context[path])
        step = re.fullmatch(r"steps\.([\w-]+)\.outputs\.([\w-]+)", path)
        assert step is not None, f"action.yml uses an expression a test cannot vouch for: {path}"
        return context["steps"].get(step.group(1), {}).get(step.group(2), "")

    return EXPRESSION.sub(value, text)


def read_commands_file(path: Path) -> dict[str, str]:
    """GITHUB_OUTPUT / GITHUB_ENV: `name=value` lines, or `name<<DELIMITER` ... `DELIMITER`."""
    values: dict[str, str] = {}
    lines = iter(path.read_text(encoding="utf-8").splitlines()) if path.exists() else iter(())
    for line in lines:
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            body = []
            for inner in lines:
                if inner == delimiter:
                    break
                body.append(inner)
            values[name] = "\n".join(body)
        elif line:
            name, value = line.split("=", 1)
            values[name] = value
    return values


def run_action(inputs: dict[str, str], tmp: Path, env: dict[str, str]) -> ActionRun:
    given = {
        name: inputs.get(name, spec.get("default", "")) for name, spec in ACTION["inputs"].items()
    }
    assert set(inputs) <= set(given), f"unknown inputs {set(inputs) - set(given)}"
    for name, spec in ACTION["inputs"].items():
        assert given[name] or not spec.get("required"), f"input {name} is required"
    temp = tmp / "runner-temp"
    temp.mkdir(exist_ok=True)
    context: dict[str, Any] = {
        "inputs": given,
        "github.action_path": ROOT,
        "runner.temp": temp,
        "steps": {},
    }
    summary_file, env_file = tmp / "step-summary.md", tmp / "github-env"
    added: dict[str, str] = {}
    log, code = [], 0
    assert ACTION["runs"]["using"] == "composite"
    for number, step in enumerate(ACTION["runs"]["steps"]):
        assert set(step) <= {"name", "id", "shell", "env", "run"}, "run: steps only"
        assert "${{" not in step["run"], "an expression inside run: is script injection"
        output_file = tmp / f"output-{number}"
        script = tmp / f"step-{number}.sh"
        script.write_text(step["run"], encoding="utf-8")
        step_env = (
            env
            | added
            | {
                "GITHUB_ACTIONS": "true",
                "GITHUB_ACTION_PATH": str(ROOT),
                "RUNNER_TEMP": str(temp),
                "GITHUB_OUTPUT": str(output_file),
                "GITHUB_STEP_SUMMARY": str(summary_file),
                "GITHUB_ENV": str(env_file),
            }
            | {k: evaluate(str(v), context) for k, v in step.get("env", {}).items()}
        )
        assert step["shell"] == "bash"
        done = subprocess.run(  # the command line GitHub runs a `shell: bash` step with
            [BASH, "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            env=step_env,
            cwd=tmp,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        log.append(done.stdout + done.stderr)
        added |= read_commands_file(env_file)
        if "id" in step:
            context["steps"][step["id"]] = read_commands_file(output_file)
        code = done.returncode
        if code != 0:
            break  # a failed step ends a composite action; later steps do not run
    outputs = {name: evaluate(spec["value"], context) for name, spec in ACTION["outputs"].items()}
    summary = summary_file.read_text(encoding="utf-8") if summary_file.exists() else ""
    return ActionRun(outputs, summary, "".join(log), code)


def checkout_env() -> dict[str, str]:
    """This checkout's evalgate first on PATH (install: false takes it from there)."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("EVALGATE_", "GITHUB_"))}
    return keep | {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
