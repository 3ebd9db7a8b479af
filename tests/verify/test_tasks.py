"""A config's identity includes its task: a GSM8K run and a GPQA-diamond run of one model,
hardware and topology are two results in verify's table, in --expect, in --baseline pairing and
in every report (docs/verify.md, "How a config and a run are identified"); verdicts are
evalgate.verdict/2, and verdict/1's schema stays, frozen, for the documents already written.

Black-box: real `evalgate run`s (each its own process) against the loopback engine, then
`evalgate verify` as its own process, every report read back.
"""

from __future__ import annotations

import hashlib
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from evalgate.schemas import HERE, validation_errors
from tests.conftest import run_args, run_subprocess
from tests.fakeengine import EngineBehaviour, FakeEngine, choice_docs, gpqa_rows
from tests.tasks.test_gpqa import TASK as GPQA
from tests.tasks.test_gpqa import write_csv

QUESTIONS = 30
GSM8K_KEY = "fake b200 vllm fp8 isl=1024 osl=512 conc=4"
GPQA_KEY = f"{GSM8K_KEY} task={GPQA}"
LABELS = ("--model-prefix", "fake", "--hardware", "b200", "--framework", "vllm")
LABELS += ("--precision", "fp8", "--num-concurrent", "4", "--min-samples", "0")
DATA = Path(__file__).parent / "data"


def sweep_of_both_tasks(root: Path) -> Path:
    """One config run twice: GSM8K and GPQA-diamond, both passing."""
    rows = gpqa_rows(QUESTIONS)
    data = write_csv(root / "gpqa-data", rows).parent
    behaviour = EngineBehaviour(max_model_len=4096, accuracy=0.9, choice_docs=choice_docs(rows))
    with FakeEngine(behaviour) as engine:
        for name, task in (("gsm8k", ()), ("gpqa", ("--task", GPQA, "--dataset-dir", str(data)))):
            args = run_args(engine.url, root / "sweep" / name, *LABELS, *task)
            done = run_subprocess(*args, "--limit", str(QUESTIONS))
            assert done.returncode == 0, done.stderr
    return root / "sweep"


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("tasks")
    limits = base / "thresholds.json"
    limits.write_text(json.dumps({"default": {"gsm8k": 0.8, GPQA: 0.3}}))
    return {
        "today": sweep_of_both_tasks(base / "today"),
        "baseline": sweep_of_both_tasks(base / "baseline"),
        "thresholds": limits,
    }


def verify(sweeps: dict[str, Path], tmp_path: Path, *extra: str) -> tuple[int, str, Path]:
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


def test_two_tasks_of_one_config_are_two_results_in_every_report(sweeps, tmp_path):
    code, out, reports = verify(sweeps, tmp_path)

    assert code == 0, out
    rows = [re.match(r"(PASS) +(.+?)  +\d", line) for line in out.splitlines()]
    assert [row.groups() for row in rows if row] == [("PASS", GSM8K_KEY), ("PASS", GPQA_KEY)]
    assert "DUPLICATE" not in out
    assert "2 results for 2 configs: 2 pass" in out
    document = json.loads((reports / "verdict.json").read_text())
    assert validation_errors("verdict", document) == []
    assert document["schema"] == "evalgate.verdict/2"
    assert sorted((e["key"], e["task"], e["outcome"]) for e in document["entries"]) == [
        (GSM8K_KEY, "gsm8k", "pass"),
        (GPQA_KEY, GPQA, "pass"),
    ]
    cases = ET.parse(reports / "junit.xml").iter("testcase")  # noqa: S314 - evalgate's own output
    assert sorted(case.get("name", "") for case in cases) == [GSM8K_KEY, GPQA_KEY]
    summary = (reports / "summary.md").read_text()
    assert GPQA_KEY in summary and "duplicate" not in summary.lower()
    page = (reports / "page.html").read_text()
    assert GPQA_KEY in page and "duplicate" not in page.lower()


def test_an_expect_entry_without_a_task_means_gsm8k(sweeps, tmp_path):
    manifest = tmp_path / "expected.json"
    manifest.write_text(json.dumps([{"model_prefix": "fake", "concurrency": 4}]))

    code, out, reports = verify(sweeps, tmp_path, "--expect", str(manifest))

    assert code == 1, out
    document = json.loads((reports / "verdict.json").read_text())
    problems = [(e["outcome"], e["key"]) for e in document["entries"] if e["source"] is None]
    assert problems == [("unexpected", GPQA_KEY)]


def test_an_expect_entry_naming_both_tasks_expects_both(sweeps, tmp_path):
    manifest = tmp_path / "expected.json"
    tasks = ["gsm8k", GPQA]
    manifest.write_text(json.dumps([{"model_prefix": "fake", "concurrency": 4, "task": tasks}]))

    code, out, _ = verify(sweeps, tmp_path, "--expect", str(manifest))

    assert code == 0, out


def test_each_task_is_paired_with_the_same_task_of_the_baseline(sweeps, tmp_path):
    code, out, reports = verify(sweeps, tmp_path, "--baseline", str(sweeps["baseline"]))

    assert code == 0, out
    # paired, each with its own task (30 identical answers are too few to call equivalent)
    assert "against the baseline: 2 inconclusive" in out
    document = json.loads((reports / "verdict.json").read_text())
    assert {e["versus"]["standing"] for e in document["entries"]} == {"inconclusive"}
    paired = {e["task"]: e["versus"]["baseline_path"] for e in document["entries"]}
    assert paired == {
        "gsm8k": str(sweeps["baseline"] / "gsm8k" / "result.json"),
        GPQA: str(sweeps["baseline"] / "gpqa" / "result.json"),
    }


def test_verdict_1_stays_frozen_for_the_documents_already_written():
    """A verdict written by evalgate before verdict/2 (kept in tests/verify/data) is valid
    against schemas/verdict-1.schema.json, whose text never changes, and not against today's."""
    frozen = HERE / "verdict-1.schema.json"
    assert hashlib.sha256(frozen.read_bytes()).hexdigest() == (
        "60c7b82476edd1cdf0b93a62f8eac5a77885ae3573ec9c89164aebeb7621273d"
    )
    written = json.loads((DATA / "verdict-1.json").read_text())
    assert written["schema"] == "evalgate.verdict/1"
    assert validation_errors("verdict-1", written) == []
    assert validation_errors("verdict", written) != []
