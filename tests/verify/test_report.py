"""report.py: the terminal table, GitHub summary and annotations, JUnit XML, verdict document."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from typing import Any

import pytest
from msgspec import structs

from evalgate import scrub
from evalgate.evidence.model import Labels, to_document
from evalgate.gate.verdict import Score
from evalgate.schemas import validation_errors
from evalgate.thresholds import parse_thresholds
from evalgate.verify import report, sweep
from evalgate.verify.collect import Collection, Found, Note
from evalgate.verify.document import document as verdict_document
from evalgate.verify.expect import Expectation, parse_expectation
from evalgate.verify.report import junit

pytestmark = pytest.mark.unit


THRESHOLDS = parse_thresholds({"default": {"gsm8k": 0.90}}, "t.json")


def run(conc: int, value: float, n: int = 1319, **extra: Any) -> Found:
    labels = Labels(model_prefix="dsr1", hardware="b200", concurrency=conc)
    scores = tuple(
        Score(task="gsm8k", metric="exact_match", filter=name, value=value, stderr=None, n=n)
        for name in ("strict-match", "flexible-extract")
    )
    return Found(f"a/{conc}/result.json", "evalgate", "m", labels, scores, **extra)


def decide(
    *found: Found, malformed: tuple[Note, ...] = (), expect: Any = None, empty: tuple[str, ...] = ()
) -> sweep.Report:
    collection = Collection(list(found), list(malformed), [], list(empty))
    return sweep.judge_sweep(collection, sweep.Rule(THRESHOLDS), paths=["a"], expectation=expect)


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


def test_the_table_lists_configs_by_their_numbers_with_or_without_an_isl():
    """conc=4 before conc=16, whether the configs name their sequence lengths or not."""
    with_isl = Labels(model_prefix="dsr1", isl=1024, osl=1024)
    runs = [run(c, 0.95) for c in (16, 4, 128, 32)]
    runs += [
        structs.replace(run(c, 0.95), labels=structs.replace(with_isl, concurrency=c))
        for c in (16, 4)
    ]
    runs = [structs.replace(r, path=f"a/{i}/result.json") for i, r in enumerate(runs)]
    lines = report.terminal(decide(*runs)).splitlines()[1:7]
    order = [next(w for w in line.split() if w.startswith("conc=")) for line in lines]
    assert order == ["conc=4", "conc=16", "conc=4", "conc=16", "conc=32", "conc=128"]


def test_rows_decided_alike_print_alike_and_keep_their_own_config():
    """Runs with the same scores get the same cells, each row with its own config and outcome."""
    result = decide(run(4, 0.95), run(8, 0.5), run(16, 0.95), run(32, 0.5, n=50))
    rows = {line.split()[3]: line.split() for line in report.terminal(result).splitlines()[1:5]}
    assert rows["conc=4"][0] == rows["conc=16"][0] == "PASS"
    assert rows["conc=4"][4:] == rows["conc=16"][4:]
    assert rows["conc=4"][4:6] == ["0.9500", "±0.0060"]
    assert rows["conc=8"][0] == "FAIL" and rows["conc=8"][4:6] == ["0.5000", "±0.0138"]
    assert rows["conc=32"][4:6] == ["0.5000", "±0.0714"] and rows["conc=32"][-3] == "50"


def test_the_terminal_lists_ignored_files():
    collection = Collection([run(4, 0.95)], [], [Note("x/results_a.json", "x is not lm-eval")])
    result = sweep.judge_sweep(collection, sweep.Rule(THRESHOLDS), paths=["x"])
    assert "ignored: x is not lm-eval\n" in report.terminal(result)


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
    root = ET.fromstring(junit(result))  # noqa: S314 - evalgate's own output
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
        decide(run(4, 0.95), expect=Expectation("2", count=2, configs=())),
        decide(
            Found(
                "b/results.json",
                "lm-eval",
                None,
                Labels(),
                (),
                "error",
                "eval",
                "meta_env.json has no lm-eval results",
            )
        ),
    ],
)
def test_the_verdict_document_matches_its_schema(result):
    document = json.loads(scrub.json_text(to_document(verdict_document(result))))
    assert validation_errors("verdict", document) == []
    assert document["exit_code"] == result.exit_code
    assert sum(document["counts"].values()) == len(document["entries"])


def test_the_summary_draws_a_mermaid_chart_above_its_tables():
    text = report.markdown(decide(run(4, 0.95), run(8, 0.5), run(16, 0.92, n=50)))
    chart = text.split("```mermaid\n")[1].split("```")[0]
    assert chart.splitlines() == [
        "xychart-beta horizontal",
        '    title "gsm8k: score (bars), threshold (line)"',
        '    x-axis ["conc=8", "conc=16", "conc=4"]',
        '    y-axis "exact_match" 0.4 --> 1',
        "    bar [0.5000, 0.9200, 0.9500]",
        "    line [0.9000, 0.9000, 0.9000]",
    ]
    assert "gsm8k: 3 configs of `dsr1 b200`." in text
    assert text.index("```mermaid") < text.index("| ❌ fail |")


def test_a_big_sweep_charts_its_problems_first_and_fits_githubs_summary_limit():
    broken = [
        run(c, 0.95, status="error", stage="eval", reason="engine died: " + "x" * 3000)
        for c in range(1, 1201)
    ]
    failing = [run(c, 0.5 + c / 10_000) for c in range(2001, 2021)]
    passing = [run(c, 0.90 + c / 1_000_000) for c in range(3001, 5001)]
    text = report.markdown(decide(*broken, *failing, *passing))
    assert len(text.encode()) <= report.SUMMARY_BYTES == 1024 * 1024
    chart = text.split("```mermaid\n")[1].split("```")[0].splitlines()
    bars = chart[4].removeprefix("    bar [").removesuffix("]").split(", ")
    assert len(bars) == report.MAX_CHART_BARS
    assert bars[:20] == [f"{0.5 + c / 10_000:.4f}" for c in range(2001, 2021)]  # failing first
    assert bars[20] == "0.9030"  # then the passes nearest their threshold
    assert "gsm8k: 40 of 2020 configs: the problems, then those nearest their threshold" in text
    assert "1200 without a score (errored, malformed, missing): see the table." in text
    assert re.search(r"… and \d+ more \(see the JSON verdict\)\.", text)


def test_mermaid_labels_cannot_break_out_of_their_quotes():
    found = run(4, 0.95)
    labels = structs.replace(found.labels, hardware='b"200')
    text = report.markdown(
        decide(Found(found.path, "evalgate", "m", labels, found.scores), run(8, 0.95))
    )
    [axis] = [line for line in text.splitlines() if "x-axis" in line]
    assert axis == """    x-axis ["b'200 conc=4", "b200 conc=8"]"""
