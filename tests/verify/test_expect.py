"""A config's identity includes its task (verify/expect.py): a GSM8K run and a GPQA-diamond run of
one model, hardware and topology are two results in verify's table, in --expect and in every report
(docs/verify.md, "How a config and a run are identified").

Black-box: real `evalgate run`s (each its own process) against the loopback engine, then
`evalgate verify` as its own process, every report read back.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest

from evalgate.schemas import validation_errors
from tests.tasks.test_dataset import TASK as GPQA
from tests.verify.conftest import (
    GPQA_KEY,
    GSM8K_KEY,
    verify_reports,
)

pytestmark = pytest.mark.loopback


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
