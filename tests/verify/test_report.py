"""report.py: the terminal table, GitHub summary and annotations, JUnit XML, verdict document."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import pytest

from evalgate.evidence.model import LABEL_NAMES as LABELS
from evalgate.gate.verdict import Score
from evalgate.schemas import validation_errors
from evalgate.thresholds import parse_thresholds
from evalgate.verify import report, sweep
from evalgate.verify.collect import Collection, Found, Note
from evalgate.verify.expect import Expectation, parse_expectation

THRESHOLDS = parse_thresholds({"default": {"gsm8k": 0.90}}, "t.json")


def run(conc: int, value: float, n: int = 1319, **extra: Any) -> Found:
    labels = dict.fromkeys(LABELS)
    labels.update({"model_prefix": "dsr1", "hardware": "b200", "concurrency": conc})
    scores = tuple(
        Score(task="gsm8k", metric="exact_match", filter=name, value=value, stderr=None, n=n)
        for name in ("strict-match", "flexible-extract")
    )
    return Found(f"a/{conc}/result.json", "evalgate", "m", labels, scores, **extra)


def decide(
    *found: Found, malformed: tuple[Note, ...] = (), expect: Any = None, empty: tuple[str, ...] = ()
) -> sweep.Report:
    collection = Collection(list(found), list(malformed), [], list(empty))
    return sweep.judge_sweep(collection, THRESHOLDS, paths=["a"], expectation=expect)


def test_the_terminal_lists_problems_after_the_table():
    text = report.terminal(decide(run(4, 0.95), run(8, 0.5)))
    table, problems = text.split("Problems:")
    assert table.splitlines()[0].split() == [
        "RESULT",
        "CONFIG",
        "SCORE",
        "(deciding",
        "filter)",
        "95%",
        "CI",
        "N",
        "THRESHOLD",
    ]
    assert "PASS          dsr1 b200 conc=4  0.9500 ±0.0060 strict-match  [0.9369, 0.9605]" in table
    assert "  FAIL         dsr1 b200 conc=8\n" in problems
    assert "               a/8/result.json\n" in problems
    assert text.endswith(
        "evalgate verify: FAIL (exit 1): 2 results for 2 configs: 1 pass, 1 fail\n"
    )


def test_the_terminal_lists_ignored_files():
    collection = Collection([run(4, 0.95)], [], [Note("x/results_a.json", "x is not lm-eval")])
    result = sweep.judge_sweep(collection, THRESHOLDS, paths=["x"])
    assert "ignored: x is not lm-eval\n" in report.terminal(result)


@pytest.mark.parametrize(
    ("text", "escaped"),
    [("50% done\nnext", "50%25 done%0Anext"), ("a\r\nb", "a%0D%0Ab")],
)
def test_workflow_command_data_is_escaped(text, escaped):
    assert report._escape_data(text) == escaped
    assert report._escape_property(f"{text}: a,b") == f"{escaped}%3A a%2Cb"


def test_annotations_are_capped_per_level():
    result = decide(*(run(c, 0.5) for c in range(1, 15)), run(20, 0.92, n=50))
    lines = report.workflow_commands(result).splitlines()
    errors = [line for line in lines if line.startswith("::error ")]
    assert len(errors) == report.MAX_ANNOTATIONS
    assert errors[-1] == "::error title=evalgate verify::5 more error entries: see the job summary"
    [warning] = [line for line in lines if line.startswith("::warning ")]
    assert "title=evalgate verify inconclusive%3A dsr1 b200 conc=20::" in warning


def test_markdown_escapes_pipes_and_caps_rows(monkeypatch):
    monkeypatch.setattr(report, "MAX_SUMMARY_ROWS", 2)
    note = Note("a|b/result.json", "a|b/result.json is not valid JSON")
    text = report.markdown(decide(run(1, 0.95), run(2, 0.95), run(3, 0.95), malformed=(note,)))
    assert "| 🧩 malformed | a\\|b/result.json | - | - | - | - | a\\|b/result.json is not" in text
    assert "<details><summary>3 passing</summary>" in text
    assert "… and 1 more (see the JSON verdict)." in text


def test_junit_marks_inconclusive_as_skipped_and_names_set_problems():
    expect = parse_expectation([{"model_prefix": "dsr1", "concurrency": [4, 8, 16]}], "e")
    result = decide(run(4, 0.92, n=50), run(8, 0.95), run(8, 0.95), expect=expect)
    root = ET.fromstring(report.junit(result))  # noqa: S314 - evalgate's own output
    cases = {case.get("name"): case for case in root.iter("testcase")}
    assert set(cases) == {"dsr1 b200 conc=4", "dsr1 b200 conc=8", "dsr1 conc=16"}
    assert cases["dsr1 b200 conc=4"].find("skipped").get("type") == "inconclusive"
    assert cases["dsr1 b200 conc=8"].find("failure").get("type") == "duplicate"
    assert cases["dsr1 conc=16"].find("failure").get("type") == "missing"
    assert root.get("tests") == "3" and root.get("failures") == "2" and root.get("skipped") == "1"


@pytest.mark.parametrize(
    "result",
    [
        decide(empty=("a",)),
        decide(run(4, 0.95), run(8, 0.92, n=50)),
        decide(run(4, 0.95), expect=Expectation("2", count=2)),
        decide(
            Found(
                "b/results.json",
                "lm-eval",
                None,
                dict.fromkeys(LABELS),
                (),
                "error",
                "eval",
                "meta_env.json has no lm-eval results",
            )
        ),
    ],
)
def test_the_verdict_document_matches_its_schema(result):
    document = report.document(result)
    assert validation_errors("verdict", document) == []
    assert document["exit_code"] == result.exit_code
    assert sum(document["counts"].values()) == len(document["entries"])
