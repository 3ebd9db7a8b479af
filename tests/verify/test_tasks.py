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
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from evalgate.schemas import HERE, validation_errors
from tests.conftest import load_result, run_args, run_subprocess
from tests.fakeengine import EngineBehaviour, FakeEngine
from tests.tasks.test_dataset import TASK as GPQA
from tests.verify.conftest import (
    GPQA_KEY,
    GSM8K_KEY,
    LABELS,
    QUESTIONS,
    verify_reports,
)

pytestmark = pytest.mark.loopback

DATA = Path(__file__).parent / "data"


def test_two_tasks_of_one_config_are_two_results_in_every_report(task_sweeps, tmp_path):
    code, out, reports = verify_reports(task_sweeps, tmp_path)

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


def test_an_expect_entry_without_a_task_means_gsm8k(task_sweeps, tmp_path):
    manifest = tmp_path / "expected.json"
    manifest.write_text(json.dumps([{"model_prefix": "fake", "concurrency": 4}]))

    code, out, reports = verify_reports(task_sweeps, tmp_path, "--expect", str(manifest))

    assert code == 1, out
    document = json.loads((reports / "verdict.json").read_text())
    problems = [(e["outcome"], e["key"]) for e in document["entries"] if e["source"] is None]
    assert problems == [("unexpected", GPQA_KEY)]


def test_an_expect_entry_naming_both_tasks_expects_both(task_sweeps, tmp_path):
    manifest = tmp_path / "expected.json"
    tasks = ["gsm8k", GPQA]
    manifest.write_text(json.dumps([{"model_prefix": "fake", "concurrency": 4, "task": tasks}]))

    code, out, _ = verify_reports(task_sweeps, tmp_path, "--expect", str(manifest))

    assert code == 0, out


def test_each_task_is_paired_with_the_same_task_of_the_baseline(task_sweeps, tmp_path):
    code, out, reports = verify_reports(
        task_sweeps, tmp_path, "--baseline", str(task_sweeps["baseline"])
    )

    assert code == 0, out
    # paired, each with its own task (30 identical answers are too few to call equivalent)
    assert "against the baseline: 2 inconclusive" in out
    document = json.loads((reports / "verdict.json").read_text())
    assert {e["versus"]["standing"] for e in document["entries"]} == {"inconclusive"}
    paired = {e["task"]: e["versus"]["baseline_path"] for e in document["entries"]}
    assert paired == {
        "gsm8k": str(task_sweeps["baseline"] / "gsm8k" / "result.json"),
        GPQA: str(task_sweeps["baseline"] / "gpqa" / "result.json"),
    }


def sweep_with_an_errored_gpqa_run(task_sweeps: dict[str, Path], root: Path) -> Path:
    """Today's passing GSM8K run, and a GPQA-diamond run of the same config that stops before
    its eval: no --dataset-dir, so it never reaches the engine and records no eval."""
    sweep = root / "sweep"
    shutil.copytree(task_sweeps["today"] / "gsm8k", sweep / "gsm8k")
    with FakeEngine(EngineBehaviour(max_model_len=4096)) as engine:
        args = run_args(engine.url, sweep / "gpqa", *LABELS, "--task", GPQA)
        done = run_subprocess(*args, "--limit", str(QUESTIONS))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--dataset-dir" in done.stderr
    return sweep


def verify_sweep(sweep: Path, sweeps: dict[str, Path], tmp_path: Path) -> tuple[int, str, dict]:
    """verify one sweep; (exit code, stdout and stderr, the verdict document)."""
    report = tmp_path / "verdict.json"
    done = run_subprocess(
        "verify", str(sweep), "--thresholds", str(sweeps["thresholds"]), "--json", str(report)
    )
    return done.returncode, done.stdout + done.stderr, json.loads(report.read_text())


def test_a_run_stopped_before_its_eval_is_a_result_of_the_task_asked_for(task_sweeps, tmp_path):
    sweep = sweep_with_an_errored_gpqa_run(task_sweeps, tmp_path)

    code, out, document = verify_sweep(sweep, task_sweeps, tmp_path)

    assert code == 1, out  # the error, and only it
    assert "DUPLICATE" not in out
    assert "2 results for 2 configs: 1 pass, 1 error" in out
    rows = [re.match(r"(PASS|ERROR) +(.+?)  ", line) for line in out.splitlines()]
    assert [row.groups() for row in rows if row] == [("PASS", GSM8K_KEY), ("ERROR", GPQA_KEY)]
    assert sorted((e["key"], e["task"], e["outcome"]) for e in document["entries"]) == [
        (GSM8K_KEY, "gsm8k", "pass"),
        (GPQA_KEY, GPQA, "error"),
    ]
    written = load_result(sweep / "gpqa")
    assert (written["status"], written["eval"], written["task"]) == ("error", None, GPQA)


def test_a_result_written_before_results_named_their_task_is_read_as_before(task_sweeps, tmp_path):
    """result.json without its task (every evalgate before 0.2.0): the eval's task, and with no
    eval GSM8K, as always; so beside a GSM8K run of its config it is a duplicate."""
    sweep = sweep_with_an_errored_gpqa_run(task_sweeps, tmp_path)
    path = sweep / "gpqa" / "result.json"
    older = json.loads(path.read_text())
    older.pop("task", None)
    path.write_text(json.dumps(older))
    assert validation_errors("result", older) == []

    code, out, document = verify_sweep(sweep, task_sweeps, tmp_path)

    assert code == 1, out
    assert "DUPLICATE" in out
    assert {e["task"] for e in document["entries"] if e["source"] is not None} == {"gsm8k"}


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
