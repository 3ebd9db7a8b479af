"""evalgate compare on GPQA-shaped runs (every question asked twice), made by `evalgate run`
against the fake engine on a made-up GPQA-shaped set."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from evalgate.schemas import validation_errors
from tests.conftest import load_samples, run_args
from tests.fakeengine import EngineBehaviour, FakeEngine, answered_right, choice_docs, gpqa_rows
from tests.tasks.test_gpqa import write_csv

pytestmark = pytest.mark.loopback

TASK = "gpqa_diamond_cot_n_shot"
QUESTIONS = 50
ACCURACY = 0.6


def gpqa_run(cli, data: Path, out: Path, wrong: list[str]) -> None:
    """`evalgate run` of GPQA-diamond at ACCURACY, the questions in `wrong` answered wrong."""
    rows = gpqa_rows(QUESTIONS)
    behaviour = EngineBehaviour(
        accuracy=ACCURACY, choice_docs=choice_docs(rows), wrong_questions=frozenset(wrong)
    )
    with FakeEngine(behaviour) as engine:
        result = cli(*run_args(engine.url, out, "--task", TASK, "--dataset-dir", str(data)))
    assert result.code == 0, result.text


def test_compare_of_gpqa_runs_clusters_each_question_s_two_repeats(cli, tmp_path):
    rows = gpqa_rows(QUESTIONS)
    data = write_csv(tmp_path / "data", rows).parent
    right = [row["Question"] for i, row in enumerate(rows) if answered_right(i, ACCURACY)]
    gpqa_run(cli, data, tmp_path / "base", [])
    gpqa_run(cli, data, tmp_path / "five", right[:5])  # 5 questions lost: 10 answers
    gpqa_run(cli, data, tmp_path / "eight", right[:8])

    samples = load_samples(tmp_path / "base")
    assert [(s["doc_id"], s["cluster"], s["repeat"]) for s in samples[:4]] == [
        (0, 0, 0),
        (1, 0, 1),
        (2, 2, 0),
        (3, 2, 1),
    ]

    # Ten answers lost, all from five questions: counted as independent answers that is
    # p = 2/1024, a REGRESSION; as five questions p = 2/32, not significant.
    result = cli("compare", str(tmp_path / "base"), str(tmp_path / "five"))
    assert result.code == 5, result.text
    assert result.out.startswith("evalgate compare: INCONCLUSIVE (exit 5)")
    assert (
        "extract_abcd: 100 answers to 50 questions paired by (question, repeat); the repeats of "
        "each question are one cluster in the statistics (design effect 2.02)." in result.out
    )
    assert "10 answers lost, 0 gained, of 100 answers to 50 questions: -10.00 points" in (
        result.out
    )
    assert "clustered McNemar p = 0.062" in result.out
    assert "repeated questions clustered: clustered exact McNemar test" in result.out

    result = cli("compare", str(tmp_path / "base"), str(tmp_path / "eight"), "--json", "-")
    assert result.code == 1, result.text
    document = json.loads(result.out)
    assert validation_errors("comparison", document) == []
    assert document["verdict"] == "regression"
    [flt] = document["filters"]
    assert (flt["filter"], flt["n"], flt["questions"], flt["repeats_clustered"]) == (
        "extract_abcd",
        100,
        50,
        True,
    )
    assert (flt["lost"], flt["gained"], flt["p_value"]) == (16, 0, 2 / 2**8)
    assert flt["design_effect"] > 1.9
    assert "repeats" in document["method"]

    result = cli("compare", str(tmp_path / "base"), str(tmp_path / "eight"), "--markdown")
    assert result.code == 1
    assert "- extract_abcd: 100 answers to 50 questions paired by (question, repeat)" in (
        result.out
    )

    page = tmp_path / "compare.html"
    result = cli("compare", str(tmp_path / "base"), str(tmp_path / "five"), "--html", str(page))
    assert result.code == 5
    html = page.read_text(encoding="utf-8")
    assert "100 answers, 50 questions" in html
    assert "over 100 paired answers to 50 questions, their repeats clustered" in html

    # The same runs as written before samples recorded the repeats: counted as independent
    # answers (p = 2/1024, a REGRESSION), with a warning that says so.
    for name in ("base", "five"):
        old = tmp_path / f"old-{name}"
        shutil.copytree(tmp_path / name, old)
        lines = (old / "samples.jsonl").read_text(encoding="utf-8").splitlines()
        stripped = []
        for line in lines:
            record = json.loads(line)
            del record["cluster"], record["repeat"]
            assert validation_errors("sample", record) == []
            stripped.append(json.dumps(record) + "\n")
        (old / "samples.jsonl").write_text("".join(stripped), encoding="utf-8")
    result = cli("compare", str(tmp_path / "old-base"), str(tmp_path / "old-five"))
    assert result.code == 1, result.text
    assert "10 lost, 0 gained: -10.00 points" in result.out
    assert "McNemar p = 0.002" in result.out
    assert (
        "warning: the baseline run asks 50 question(s) more than once but its samples do not "
        "record the repeats" in result.out
    )
