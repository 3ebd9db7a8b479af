"""verify on a run that stopped early (--early-stop): its sequential test decides, not its n."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalgate.gate.sequential import SequentialTest
from evalgate.schemas import validation_errors
from tests.compare.run_files import paired_outcomes, write_run
from tests.conftest import run_subprocess
from tests.verify.sweeps import result_doc, thresholds


def _stopped(n: int, right: int, alpha: float, decision: str | None) -> dict[str, Any]:
    doc = result_doc(scores=(right / n, right / n), n=n, status="pass" if right else "fail")
    doc["eval"]["early_stop"] = {
        "mode": "both",
        "alpha": alpha,
        "prior_weight": 10.0,
        "order_seed": 1234,
        "stopped": decision is not None,
        "decision": decision,
        "questions": 1319,
        "questions_used": n,
        "questions_asked": n + 7,
        "filters": [
            {"filter": f, "right": right, "n": n, "e_value": 6.53, "certain": "above"}
            for f in ("strict-match", "flexible-extract")
        ],
    }
    assert validation_errors("result", doc) == []
    return doc


def _write(folder: Path, doc: dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "result.json").write_text(json.dumps(doc))
    return folder


@pytest.mark.unit
def test_the_case_is_one_the_interval_alone_cannot_decide():
    """35 of 35 right against dsr1's 0.91: the 95% Wilson interval starts at 0.901, but the
    run's sequential test at alpha 0.2 is certain (E = 6.5 >= 1 / 0.2)."""
    test = SequentialTest(0.91, ("strict-match", "flexible-extract"), alpha=0.2)
    assert test.side(35, 35) == "above"
    assert 5 <= test.e_value(35, 35) < 7


@pytest.mark.unit
def test_an_early_pass_is_accepted_though_n_is_small(tmp_path, cli):
    folder = _write(tmp_path / "run", _stopped(35, 35, 0.2, "pass"))
    code, out, _ = cli("verify", str(folder), "--no-github", "--json", str(tmp_path / "v.json"))
    assert code == 0, out
    verdict = json.loads((tmp_path / "v.json").read_text())
    (entry,) = verdict["entries"]
    assert entry["outcome"] == "pass"
    assert entry["reason"].endswith(
        "; stopped early after 35 of 1319 questions, the sequential test certain at alpha 0.2"
    )


@pytest.mark.unit
def test_the_same_scores_without_the_early_stop_are_inconclusive(tmp_path, cli):
    doc = _stopped(35, 35, 0.2, "pass")
    doc["eval"]["early_stop"]["stopped"] = False
    doc["eval"]["early_stop"]["decision"] = None
    folder = _write(tmp_path / "run", doc)
    code, out, _ = cli("verify", str(folder), "--no-github")
    assert code == 5, out
    assert "INCONCLUSIVE" in out


@pytest.mark.unit
def test_an_early_pass_is_not_certain_at_a_stricter_threshold(tmp_path, cli):
    folder = _write(tmp_path / "run", _stopped(35, 35, 0.2, "pass"))
    strict = tmp_path / "thresholds.json"
    strict.write_text(json.dumps({"default": {"gsm8k": 0.97}, "models": {"dsr1": {"gsm8k": 0.97}}}))
    code, out, _ = cli("verify", str(folder), "--no-github", "--thresholds", str(strict))
    assert code == 5, out  # 35 of 35 is neither certain above 0.97 nor below it


@pytest.mark.unit
def test_an_early_fail_is_a_failure(tmp_path, cli):
    folder = _write(tmp_path / "run", _stopped(5, 0, 0.05, "fail"))
    code, out, _ = cli("verify", str(folder), "--no-github")
    assert code == 1, out


# Every report names the task as --task does (gsm8k, not lm-eval's gsm8k_evalgate_chat).


@pytest.mark.loopback
def test_every_report_names_the_task_as_the_user_knows_it(dropped_sweeps, tmp_path):
    """The runs' scores are lm-eval's gsm8k_evalgate_chat: verify's page and job summary, its
    verdict document, history's page and table and compare's advice all say gsm8k."""
    base, dropped = dropped_sweeps
    out = tmp_path / "reports"
    summary = tmp_path / "summary.md"
    history = tmp_path / "history.db"
    assert "gsm8k_evalgate_chat" in (dropped / "dropped-conc8" / "result.json").read_text()
    done = run_subprocess(
        "verify", str(dropped), "--baseline", str(base), "--thresholds", str(thresholds(tmp_path)),
        "--html", str(out / "verify.html"), "--json", str(out / "verdict.json"), "--github",
        "--record", str(history), "--sweep-id", "s1",
        env={"GITHUB_STEP_SUMMARY": str(summary)},
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    page = (out / "verify.html").read_text(encoding="utf-8")
    assert "<figcaption>gsm8k: qwen3 h100 vllm fp8 kv=bf16 isl=1024 osl=1024: exact_match" in page
    assert 'title "gsm8k: score (bars), threshold (line)"' in summary.read_text(encoding="utf-8")
    shown = run_subprocess("history", str(history), "--html", str(out / "history.html"))
    assert shown.returncode == 0, shown.stderr
    assert "conc=8 [gsm8k]" in shown.stdout
    # compare: an inconclusive pair needing more questions than GSM8K has
    a, b = paired_outcomes(1319, lost=50, gained=40)
    compared = run_subprocess(
        "compare",
        str(write_run(tmp_path / "a", a)),
        str(write_run(tmp_path / "b", b)),
        "--html",
        str(out / "compare.html"),
    )
    assert compared.returncode == 5, compared.stderr
    assert "more than the 1319 questions gsm8k has: no rerun can settle it" in compared.stdout
    said = [done.stdout, shown.stdout, compared.stdout, summary.read_text(encoding="utf-8")]
    said += [path.read_text(encoding="utf-8") for path in sorted(out.iterdir())]
    assert [text for text in said if "gsm8k_evalgate" in text] == []
