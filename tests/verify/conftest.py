"""The verify tests' sweeps: one config of one model run on two tasks (GSM8K and GPQA-diamond),
today and as a baseline, and verify over it with every report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import built_once, run_args, run_subprocess
from tests.fakeengine import EngineBehaviour, FakeEngine, choice_docs, gpqa_rows
from tests.tasks.task_files import GPQA_TASK as GPQA
from tests.tasks.task_files import write_csv

QUESTIONS = 30
GSM8K_KEY = "fake b200 vllm fp8 isl=1024 osl=512 conc=4"
GPQA_KEY = f"{GSM8K_KEY} task={GPQA}"
LABELS = ("--model-prefix", "fake", "--hardware", "b200", "--framework", "vllm")
LABELS += ("--precision", "fp8", "--num-concurrent", "4", "--min-samples", "0")


def sweep_of_both_tasks(root: Path) -> None:
    """One config run twice, in root/sweep: GSM8K and GPQA-diamond, both passing."""
    rows = gpqa_rows(QUESTIONS)
    data = write_csv(root / "gpqa-data", rows).parent
    behaviour = EngineBehaviour(max_model_len=4096, accuracy=0.9, choice_docs=choice_docs(rows))
    with FakeEngine(behaviour) as engine:
        for name, task in (("gsm8k", ()), ("gpqa", ("--task", GPQA, "--dataset-dir", str(data)))):
            args = run_args(engine.url, root / "sweep" / name, *LABELS, *task)
            done = run_subprocess(*args, "--limit", str(QUESTIONS))
            assert done.returncode == 0, done.stderr


@pytest.fixture(scope="session")
def task_sweeps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Today's sweep, a baseline and their thresholds; built once per test run and only read (a
    test that adds a run copies the sweep first)."""
    base = built_once(tmp_path_factory, "tasks", write_task_sweeps)
    return {
        "today": base / "today" / "sweep",
        "baseline": base / "baseline" / "sweep",
        "thresholds": base / "thresholds.json",
    }


def write_task_sweeps(base: Path) -> None:
    (base / "thresholds.json").write_text(json.dumps({"default": {"gsm8k": 0.8, GPQA: 0.3}}))
    sweep_of_both_tasks(base / "today")
    sweep_of_both_tasks(base / "baseline")


def verify_reports(sweeps: dict[str, Path], tmp_path: Path, *extra: str) -> tuple[int, str, Path]:
    """verify today's sweep with every report; (exit code, stdout, the reports' folder)."""
    reports = tmp_path / "reports"
    summary = reports / "summary.md"
    reports.mkdir()
    done = run_subprocess(
        "verify", str(sweeps["today"]), "--thresholds", str(sweeps["thresholds"]), "--github",
        "--json", str(reports / "verdict.json"), "--junit", str(reports / "junit.xml"),
        "--html", str(reports / "page.html"), *extra,
        env={"GITHUB_STEP_SUMMARY": str(summary)},
    )  # fmt: skip
    return done.returncode, done.stdout + done.stderr, reports
