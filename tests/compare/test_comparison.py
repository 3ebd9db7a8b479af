"""The comparison of two runs (compare/comparison.py): `evalgate compare` on run folders built in
tmp_path (tests/compare/run_files.py), driven through `evalgate.cli.main`."""

from __future__ import annotations

import json

import pytest
from scipy.stats import binomtest

from evalgate.compare.comparison import compare_runs
from tests.compare.run_files import (
    comparison_json,
    gsm8k_test,
    paired_outcomes,
    write_pair,
    write_run,
)
from tests.conftest import load_result


@pytest.mark.unit
def test_identical_full_runs_are_equivalent(tmp_path, cli):
    write_pair(tmp_path, 1319)
    code, document = comparison_json(cli, tmp_path / "a", tmp_path / "b")
    assert code == 0
    assert document["verdict"] == "equivalent"
    for flt in document["filters"]:
        assert (flt["n"], flt["lost"], flt["gained"], flt["p_value"]) == (1319, 0, 0, 1.0)
        assert flt["flips"] == []
        assert flt["ci_low"] > -0.02
    code, out, _ = cli("compare", tmp_path / "a", tmp_path / "b")
    assert code == 0
    assert out.startswith("evalgate compare: EQUIVALENT (exit 0)")
    assert "any drop is within the 2.0-point margin" in out


VERDICTS = [
    # (case, flips of 1319 questions, exit code, verdict, what the report says of it)
    (
        # -1.6 points, p = 1e-6: the drop is certain and at least half the 2-point margin, so
        # the change cost accuracy
        "a certain drop within the margin is a regression",
        {"lost": 21},
        1,
        "REGRESSION",
        [
            "21 lost, 0 gained: -1.59 points",
            "McNemar p = 9.5e-07",
            "a significant drop of at least half the 2.0-point margin",
        ],
    ),
    (
        "a significant gain of practical size is improved",
        {"lost": 5, "gained": 40},
        0,
        "IMPROVED",
        ["a significant gain of at least half the 2.0-point margin"],
    ),
    (
        "a significant gain below half the margin is equivalent, and said",
        {"lost": 0, "gained": 12},  # +0.9 points, p = 0.0005
        0,
        "EQUIVALENT",
        ["the candidate is significantly better"],
    ),
]


@pytest.mark.unit
@pytest.mark.parametrize("case", [v[1:] for v in VERDICTS], ids=[v[0] for v in VERDICTS])
def test_the_verdict_and_its_reason_are_said(tmp_path, cli, case):
    flips, code, verdict, says = case
    write_pair(tmp_path, 1319, **flips)
    done = cli("compare", tmp_path / "a", tmp_path / "b")
    assert done.code == code
    assert done.out.startswith(f"evalgate compare: {verdict} (exit {code})")
    assert all(said in done.out for said in says), done.out


@pytest.mark.unit
def test_identical_small_runs_are_inconclusive_and_say_how_many_would_settle_it(tmp_path, cli):
    write_pair(tmp_path, 50, limit=50)
    code, out, _ = cli("compare", tmp_path / "a", tmp_path / "b")
    assert code == 5
    assert out.startswith("evalgate compare: INCONCLUSIVE (exit 5)")
    assert "0 lost, 0 gained" in out
    assert "McNemar p = 1.0" in out
    assert "a drop beyond the 2.0-point margin cannot be ruled out" in out
    assert (
        "about 189 paired questions would settle it at these rates (an estimate): compare "
        "runs of at least 189 questions" in out
    )
    _, document = comparison_json(cli, tmp_path / "a", tmp_path / "b")
    assert [f["questions_to_settle"] for f in document["filters"]] == [189, 189]


@pytest.mark.unit
def test_forty_lost_five_gained_is_a_regression(tmp_path, cli):
    base, cand = paired_outcomes(1319, lost=40, gained=5)
    write_run(tmp_path / "bf16", base)
    write_run(tmp_path / "fp8", cand, labels={"kv_cache_dtype": "fp8"})
    code, document = comparison_json(cli, tmp_path / "bf16", tmp_path / "fp8")
    assert code == 1
    assert document["verdict"] == "regression"
    independent = binomtest(5, 45, 0.5, alternative="two-sided").pvalue
    for flt in document["filters"]:
        assert (flt["lost"], flt["gained"], flt["n"]) == (40, 5, 1319)
        assert flt["difference"] == pytest.approx(-35 / 1319)
        assert flt["p_value"] < 0.001
        assert flt["p_value"] == pytest.approx(independent, rel=1e-9)
        assert flt["ci_high"] < 0
        assert flt["flips_total"] == 45
        assert [f["change"] for f in flt["flips"]] == ["lost"] * 10
    assert document["changed"] == [
        {"field": "kv_cache_dtype", "baseline": "bf16", "candidate": "fp8"}
    ]
    first = document["filters"][0]["flips"][0]
    question, target = gsm8k_test()[0]
    assert first == {
        "doc_id": 0,
        "change": "lost",
        "question": question,
        "target": target,
        "baseline_answer": target,
        "candidate_answer": "0",
    }

    code, out, err = cli("compare", tmp_path / "bf16", tmp_path / "fp8", "--flips", "3")
    assert (code, err) == (1, "")
    assert out.startswith("evalgate compare: REGRESSION (exit 1)")
    assert "changed    kv_cache_dtype bf16 -> fp8" in out
    assert "40 lost, 5 gained: -2.65 points" in out
    assert "a significant drop beyond the 2.0-point margin" in out
    assert "Flipped questions, strict-match (3 of 45, lost first):" in out
    assert f"doc_id 0     lost    target {target}  baseline {target}  candidate 0" in out
    assert "Flipped questions, flexible-extract: the same as strict-match." in out


@pytest.mark.unit
def test_markdown_report(tmp_path, cli):
    write_pair(tmp_path, 1319, lost=40, gained=5)
    code, out, _ = cli("compare", tmp_path / "a", tmp_path / "b", "--markdown", "--flips", "2")
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == "## evalgate compare: REGRESSION"
    header = (
        "| filter | n | baseline | candidate | diff (pts) | 95% CI (pts) | lost | gained | "
        "McNemar p | verdict |"
    )
    assert header in lines
    row = next(line for line in lines if line.startswith("| strict-match |"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[1:3] == ["1319", "79.38%"]
    assert cells[4:] == ["-2.65", "[-3.76, -1.74]", "40", "5", "7.9e-08", "REGRESSION"]
    assert "### Flipped questions, strict-match (2 of 45, lost first)" in lines
    flips = [line for line in lines if line.startswith(("| 0 | lost", "| 1 | lost", "| 2 |"))]
    assert len(flips) == 2


@pytest.mark.unit
def test_worst_filter_decides(tmp_path, cli):
    base, cand = paired_outcomes(1319, lost=40, gained=5)
    write_run(tmp_path / "a", {"strict-match": base, "flexible-extract": base})
    write_run(tmp_path / "b", {"strict-match": cand, "flexible-extract": base})
    code, document = comparison_json(cli, tmp_path / "a", tmp_path / "b")
    assert code == 1
    assert [f["verdict"] for f in document["filters"]] == ["regression", "equivalent"]
    assert document["reason"].startswith("strict-match: 40 lost, 5 gained")
    assert "flexible-extract" not in document["reason"]


@pytest.mark.unit
@pytest.mark.unit
@pytest.mark.unit
def test_more_questions_than_gsm8k_has_are_needed(tmp_path, cli):
    write_pair(tmp_path, 1319, lost=50, gained=40)
    code, out, _ = cli("compare", tmp_path / "a", tmp_path / "b")
    assert code == 5
    assert (
        "more than the 1319 questions gsm8k has: no rerun can settle it. Widen "
        "--max-drop or accept the uncertainty" in out
    )
    code, _ = comparison_json(cli, tmp_path / "a", tmp_path / "b", "--max-drop", "0.03")
    assert code == 0


@pytest.mark.unit
def test_the_questions_a_task_has_are_its_own_not_gsm8ks(tmp_path, cli):
    # A task of 400 questions (the addition example's size), run whole: what it would take is
    # weighed against its 400 questions, not against GSM8K's 1319.
    base, cand = paired_outcomes(400, lost=26, gained=24)
    for folder, correct in (("a", base), ("b", cand)):
        write_run(tmp_path / folder, correct, task="addition_chat", questions=400)
    code, out, _ = cli("compare", tmp_path / "a", tmp_path / "b")
    assert code == 5
    assert "more than the 400 questions addition_chat has: no rerun can settle it" in out
    assert "1319" not in out
    # Under --limit the whole set is unknown: the advice is to compare more questions.
    for folder, correct in (("c", base), ("d", cand)):
        write_run(tmp_path / folder, correct, task="addition_chat", questions=400, limit=400)
    code, out, _ = cli("compare", tmp_path / "c", tmp_path / "d")
    assert code == 5
    assert "would settle it at these rates (an estimate): compare runs of at least" in out
    assert "no rerun can settle it" not in out


@pytest.mark.unit
def test_failed_requests_are_left_out_and_reported(tmp_path, cli):
    base, cand = paired_outcomes(1319)
    write_run(tmp_path / "a", base, failed=[4])
    write_run(tmp_path / "b", cand, failed=[9, 12])
    code, document = comparison_json(cli, tmp_path / "a", tmp_path / "b")
    assert code == 0
    assert document["excluded"] == {
        "failed_baseline": [4],
        "failed_candidate": [9, 12],
        "unpaired": [],
    }
    assert [f["n"] for f in document["filters"]] == [1316, 1316]
    assert (
        "questions left out because their request failed in the candidate run: 2 "
        "(doc_id 9, 12)" in document["warnings"]
    )
    _, out, _ = cli("compare", tmp_path / "a", tmp_path / "b")
    assert (
        "warning: questions left out because their request failed in the baseline run: 1 "
        "(doc_id 4)" in out
    )


@pytest.mark.unit
def test_interrupted_run_is_compared_with_a_warning(tmp_path, cli):
    base, cand = paired_outcomes(1319)
    write_run(tmp_path / "a", base)
    write_run(tmp_path / "b", cand, status="aborted", stage="eval")
    _, document = comparison_json(cli, tmp_path / "a", tmp_path / "b")
    assert (
        "the candidate run ended with status aborted: its samples may be incomplete"
        in (document["warnings"])
    )


@pytest.mark.unit
@pytest.mark.parametrize("status", ["aborted", "error", "running"])
def test_a_run_stopped_after_its_eval_is_compared_without_a_status_warning(tmp_path, cli, status):
    """Its eval ended (stage gate): every answer is in its samples, whatever stopped it then."""
    base, cand = paired_outcomes(1319)
    write_run(tmp_path / "a", base)
    write_run(tmp_path / "b", cand, status=status, stage="gate")
    _, document = comparison_json(cli, tmp_path / "a", tmp_path / "b")
    assert not [w for w in document["warnings"] if "ended with status" in w], document["warnings"]


@pytest.mark.unit
@pytest.mark.parametrize("value", ["2", "-0.01", "1"])
def test_max_drop_is_a_fraction(tmp_path, cli, value):
    write_pair(tmp_path, 20)
    code, _, err = cli("compare", tmp_path / "a", tmp_path / "b", "--max-drop", value)
    assert code == 2
    assert (
        f"UsageError: --max-drop {float(value)} is not a fraction in [0, 1): 0.02 means two "
        "points of accuracy." in err
    )


@pytest.mark.unit
def test_library_call_on_full_gsm8k_finds_the_regression(tmp_path):
    write_pair(tmp_path, 1319, lost=40, gained=5)
    comparison = compare_runs(
        tmp_path / "a", tmp_path / "b", max_drop=0.02, allow_protocol_drift=False
    )
    assert int(comparison.exit_code) == 1  # its time is measured in BENCHMARKS.md


@pytest.mark.unit
@pytest.mark.parametrize("how", ["the same folder", "the folder and its result.json", "a copy"])
def test_a_run_compared_with_itself_is_refused(tmp_path, cli, how):
    base, _ = paired_outcomes(1319)
    run = write_run(tmp_path / "a", base)
    other = {
        "the same folder": run,
        "the folder and its result.json": run / "result.json",
        "a copy": tmp_path / "copy",
    }[how]
    if how == "a copy":
        other.mkdir()
        for name in ("result.json", "samples.jsonl"):
            (other / name).write_bytes((run / name).read_bytes())

    code, out, err = cli("compare", run, other)

    assert code == 2
    assert "UsageError: Both arguments are the same run (run_id a: " in err
    assert "a run always equals itself" in err
    assert "EQUIVALENT" not in out


@pytest.mark.unit
def test_two_different_models_are_compared_with_a_warning(tmp_path, cli):
    write_pair(tmp_path, 1319)
    document = load_result(tmp_path / "b")
    document["model"] = "Qwen/Qwen3-8B-FP8"
    (tmp_path / "b" / "result.json").write_text(json.dumps(document))

    code, document = comparison_json(cli, tmp_path / "a", tmp_path / "b")
    _, text, _ = cli("compare", tmp_path / "a", tmp_path / "b")

    assert code == 0
    warning = (
        "the runs are of different models (Qwen/Qwen3-8B vs Qwen/Qwen3-8B-FP8): the "
        "difference measures the model change too"
    )
    assert warning in document["warnings"]
    assert f"warning: {warning}" in text
