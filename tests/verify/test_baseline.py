"""`evalgate verify SWEEP --baseline BASELINE`: the CLI against sweeps of full GSM8K runs on disk
(tests/verify/sweeps.py), in evalgate's layout and the harness's, every report read back."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from evalgate.cli import main
from evalgate.errors import ExitCode
from evalgate.schemas import validation_errors
from evalgate.scrub import capped
from evalgate.templates import esc
from tests import outputs as ht
from tests.conftest import built_once, load_result, run_subprocess
from tests.tasks.task_files import GPQA_TASK as GPQA
from tests.verify.conftest import verify_reports
from tests.verify.sweeps import (
    CONCS,
    answers,
    baseline_answers,
    evalgate_sweep,
    harness_sweep,
    key,
    thresholds,
)

DROPPED = 16


"""The config whose answers lose 80 of the baseline's right ones: 6 points, over its floor."""


def run(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    code = main(["verify", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def reports(tmp: Path) -> tuple[list[str], dict[str, Path]]:
    out = {name: tmp / "reports" / name for name in ("junit.xml", "verdict.json", "page.html")}
    args = ["--junit", str(out["junit.xml"]), "--json", str(out["verdict.json"])]
    return [*args, "--html", str(out["page.html"])], out


def verdict(path: Path) -> dict[str, Any]:
    document = json.loads(path.read_text(encoding="utf-8"))
    assert validation_errors("verdict", document) == []
    return document


def by_key(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["key"]: e for e in document["entries"]}


@pytest.fixture(scope="session")
def sweeps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A baseline of five configs, an unchanged rerun of it, and one where conc=16 dropped; built
    once per test run and only read (verify writes its reports elsewhere; a test that changes a
    sweep copies it first)."""
    root = built_once(tmp_path_factory, "baseline-sweeps", write_sweeps)
    names = ("base", "same", "dropped")
    return {name: root / name for name in names} | {"thresholds": root / "thresholds.json"}


def write_sweeps(root: Path) -> None:
    evalgate_sweep(root / "base", "base", {c: baseline_answers() for c in CONCS})
    same = {c: answers(seed=i) for i, c in enumerate(CONCS)}
    dropped = {c: answers(seed=i, lost=80 if c == DROPPED else 0) for i, c in enumerate(CONCS)}
    evalgate_sweep(root / "same", "same", same)
    evalgate_sweep(root / "dropped", "dropped", dropped)
    thresholds(root)


@pytest.mark.loopback
def test_an_unchanged_sweep_passes_and_every_config_is_equivalent(sweeps, tmp_path, capsys):
    flags, out = reports(tmp_path)
    code, stdout, _ = run(
        capsys, sweeps["same"], "--baseline", sweeps["base"], "--thresholds", sweeps["thresholds"],
        "--no-github", *flags,
    )  # fmt: skip
    assert code == ExitCode.PASS, stdout
    assert "evalgate verify: PASS (exit 0): 5 results for 5 configs: 5 pass; against the " in stdout
    assert "against the baseline: 5 equivalent" in stdout
    assert "VS BASELINE  DIFF (95% CI)" in stdout
    document = verdict(out["verdict.json"])
    assert {e["versus"]["standing"] for e in document["entries"]} == {"equivalent"}
    assert document["baseline"]["results"] == 5
    assert document["counts"]["regression"] == 0


@pytest.mark.loopback
def test_a_drop_that_clears_its_floor_fails_and_is_named_in_every_report(
    sweeps, tmp_path, capsys, monkeypatch
):
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    flags, out = reports(tmp_path)
    code, stdout, _ = run(
        capsys, sweeps["dropped"], "--baseline", sweeps["base"],
        "--thresholds", sweeps["thresholds"], "--github", *flags,
    )  # fmt: skip
    assert code == ExitCode.FAIL, stdout
    name = key(DROPPED)
    # the terminal: the row, the problem and the verdict line
    assert f"REGRESSION    {name}  0.8893" in stdout
    assert f"  REGRESSION   {name}\n" in stdout
    assert "regressed against the baseline: -6.07 points on strict-match (95% CI [-7.62, " in stdout
    assert "after Holm's adjustment over 5 configs" in stdout
    assert ">= threshold 0.8500 (default)" in stdout  # its floor passed it
    # the regression counted once, as the outcome; the baseline's tally says the rest
    assert "4 pass, 1 regression; against the baseline: 4 equivalent\n" in stdout
    assert f"::error file={sweeps['dropped']}" in stdout
    # the job summary: the row with its difference and interval
    text = summary.read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if name in line and "regression" in line)
    assert "REGRESSION | -6.07 \\[-7.62, -4.70\\] strict-match |" in row
    ht.markdown_tables(text, "summary")
    # JUnit: its testcase fails as a regression
    cases = {c.get("name"): c for c in ht.junit(out["junit.xml"]).iter("testcase")}
    failure = cases[name].find("failure")
    assert failure is not None and failure.get("type") == "regression"
    assert "against the baseline: regression" in (failure.text or "")
    assert cases[key(4)].find("failure") is None
    # JSON: the entry, its comparison and its lost questions
    entry = by_key(verdict(out["verdict.json"]))[name]
    assert entry["outcome"] == "regression"
    versus = entry["versus"]
    assert (versus["standing"], versus["lost"], versus["gained"], versus["n"]) == (
        "regression", 90, 10, 1319,
    )  # fmt: skip
    assert versus["ci_high"] < -0.02 < 0 and versus["p_value"] < 0.05
    assert len(versus["lost_questions"]) == 20
    # HTML: the second chart names it first, with its lost questions
    page = out["page.html"].read_text(encoding="utf-8")
    chart = page.split("<figcaption>Against the baseline", 1)[1].split("</figure>")[0]
    first_row = chart.split('<div class="row tone-')[1]
    assert first_row.startswith('fail"') and '<span class="name">conc=16</span>' in first_row
    assert chart.count('<div class="row tone-') == 5
    lost = versus["lost_questions"][0]
    assert f"Lost questions of {name} on strict-match (the first 20 of 90)" in page
    assert esc(capped(lost["question"], 120)) in page


@pytest.mark.loopback
def test_new_missing_and_protocol_changed_configs_are_listed(sweeps, tmp_path, capsys):
    candidate = tmp_path / "candidate"
    shutil.copytree(sweeps["same"], candidate)
    shutil.rmtree(candidate / "same-conc64")  # missing from the sweep
    evalgate_sweep(candidate, "new", {128: answers()})  # new in the sweep
    shutil.rmtree(candidate / "same-conc8")
    evalgate_sweep(candidate, "budget", {8: answers()}, max_tokens=2048)  # another budget
    args = [candidate, "--baseline", sweeps["base"], "--thresholds", sweeps["thresholds"]]
    code, stdout, _ = run(capsys, *args, "--no-github")
    assert code == ExitCode.PASS, stdout  # listed, not failing
    assert f"  NEW          {key(128)}: new in this sweep: no result in the baseline" in stdout
    assert (
        f"  PROTOCOL     {key(8)}: measured another way than its baseline: max_tokens: "
        "baseline 1024, candidate 2048"
    ) in stdout
    assert f"  MISSING      {key(64)}: in the baseline ({sweeps['base']}" in stdout
    assert "of its configs missing" in stdout
    # with --expect, the missing config fails
    code, stdout, _ = run(capsys, *args, "--no-github", "--expect", "5")
    assert code == ExitCode.FAIL
    assert f"{key(64)} is in the baseline" in stdout


@pytest.mark.unit
def test_the_harness_layout_as_baseline_and_as_candidate(tmp_path, capsys):
    limits = thresholds(tmp_path)
    base = harness_sweep(tmp_path / "base", {c: baseline_answers() for c in CONCS[:3]})
    dropped = {c: answers(seed=i, lost=80 if c == 8 else 0) for i, c in enumerate(CONCS[:3])}
    cand = harness_sweep(tmp_path / "cand", dropped, stamp="2026-06-01T10-00-00")
    flags, out = reports(tmp_path)
    code, stdout, _ = run(capsys, cand, "--baseline", base, "--thresholds", limits, *flags)
    assert code == ExitCode.FAIL, stdout
    assert "2 pass, 1 regression; against the baseline: 2 equivalent\n" in stdout
    entries = by_key(verdict(out["verdict.json"]))
    assert entries[f"{key(8)} tp=1 ep=1 dpa=false"]["outcome"] == "regression"
    # evalgate's layout against the harness's, both ways: paired where the protocol agrees
    mine = evalgate_sweep(
        tmp_path / "mine", "mine", {c: answers(seed=i) for i, c in enumerate(CONCS[:3])},
        labels={"topology": {"tp": 1, "ep": 1, "dp_attention": False}},
        task="gsm8k", max_tokens=5376, task_version="3.0", num_fewshot=5,
    )  # fmt: skip
    for sweep, baseline in ((mine, base), (base, mine)):
        code, stdout, _ = run(capsys, sweep, "--baseline", baseline, "--thresholds", limits)
        assert code == ExitCode.PASS, stdout
        assert "against the baseline: 3 equivalent" in stdout


@pytest.mark.loopback
def test_a_waived_regression_passes_and_an_expired_waiver_fails(sweeps, tmp_path, capsys):
    waivers = tmp_path / "waivers.yaml"
    waivers.write_text(
        f"- config: {key(DROPPED)}\n  reason: fp8 KV cache, accepted for the throughput\n"
        "  who: jane\n  until: 2999-12-31\n",
        encoding="utf-8",
    )
    flags, out = reports(tmp_path)
    args = [sweeps["dropped"], "--baseline", sweeps["base"], "--thresholds", sweeps["thresholds"]]
    code, stdout, _ = run(capsys, *args, "--waivers", waivers, *flags)
    assert code == ExitCode.PASS, stdout
    assert "REGRESSION (waived)" in stdout
    assert "waived until 2999-12-31 by jane: fp8 KV cache, accepted for the throughput" in stdout
    versus = by_key(verdict(out["verdict.json"]))[key(DROPPED)]["versus"]
    assert versus["waiver"]["who"] == "jane"
    assert "waived until 2999-12-31" in out["page.html"].read_text(encoding="utf-8")
    junit = out["junit.xml"].read_text(encoding="utf-8")
    assert "against the baseline: regression (waived until 2999-12-31 by jane" in junit
    # past its date: the regression fails, and so does the waiver
    waivers.write_text(waivers.read_text().replace("2999-12-31", "2020-01-31"), encoding="utf-8")
    code, stdout, _ = run(capsys, *args, "--waivers", waivers)
    assert code == ExitCode.FAIL
    assert f"  EXPIRED      {key(DROPPED)}\n" in stdout
    assert "expired on 2020-01-31: fix the regression it accepted, renew the waiver" in stdout
    assert "regressed against the baseline (its waiver expired)" in stdout


@pytest.mark.loopback
@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- config: x\n  reason: r\n  who: w\n", "has no until: a waiver has exactly config"),
        (
            "- {config: x, reason: r, who: w, until: 30/06/2026}",
            "until is '30/06/2026', not a date",
        ),
        ("{a: 1}", "holds dict, not a list of waivers"),
        ("- [", "is not valid YAML"),
    ],
)
def test_a_malformed_waiver_file_is_a_usage_error(sweeps, tmp_path, capsys, text, message):
    waivers = tmp_path / "w.yaml"
    waivers.write_text(text, encoding="utf-8")
    args = [sweeps["same"], "--baseline", sweeps["base"], "--waivers", waivers]
    code, _, stderr = run(capsys, *args)
    assert code == ExitCode.USAGE
    assert message in stderr and str(waivers) in stderr


@pytest.mark.loopback
def test_a_baseline_with_no_result_and_waivers_without_a_baseline_are_usage_errors(
    sweeps, tmp_path, capsys
):
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, stderr = run(capsys, sweeps["same"], "--baseline", empty)
    assert code == ExitCode.USAGE
    assert f"--baseline {empty} holds no eval result to compare with." in stderr
    waivers = tmp_path / "w.yaml"
    waivers.write_text("[]\n", encoding="utf-8")
    code, _, stderr = run(capsys, sweeps["same"], "--waivers", waivers)
    assert code == ExitCode.USAGE
    assert "--waivers applies to --baseline: pass the baseline sweep too." in stderr


@pytest.mark.loopback
def test_an_early_stopped_run_and_a_baseline_below_its_floor_are_reported(sweeps, tmp_path, capsys):
    base = tmp_path / "base2"
    shutil.copytree(sweeps["base"], base)
    low = [i % 5 != 0 for i in range(1319)]  # 0.80: below the 0.85 floor
    shutil.rmtree(base / "base-conc4")
    evalgate_sweep(base, "low", {4: low})
    cand = tmp_path / "cand"
    shutil.copytree(sweeps["same"], cand)
    shutil.rmtree(cand / "same-conc4")
    evalgate_sweep(cand, "up", {4: [i % 5 != 0 or i % 10 == 5 for i in range(1319)]})
    result = load_result(cand / "same-conc8")
    result["eval"]["early_stop"] = {
        "mode": "both", "alpha": 0.05, "prior_weight": 1.0, "stopped": True, "decision": "pass",
        "questions": 1319, "questions_used": 200, "questions_asked": 264, "filters": [],
    }  # fmt: skip
    (cand / "same-conc8" / "result.json").write_text(json.dumps(result))
    code, stdout, _ = run(capsys, cand, "--baseline", base, "--thresholds", sweeps["thresholds"])
    assert code == ExitCode.PASS, stdout
    assert f"  EARLY-STOP   {key(8)}: The candidate run " in stdout
    assert "stopped early (--early-stop both) after 200 of 1319 questions" in stdout
    assert f"  WARNING      {key(4)}: the baseline was not green: its run is fail" in stdout
    assert "IMPROVED" in stdout


@pytest.mark.unit
def test_hostile_answers_and_model_names_are_neutralised_in_every_report(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv("OPENAI_API_KEY", ht.KEY)  # verify's secrets: its environment's
    monkeypatch.setenv("ROUTER_URL", ht.with_password("http://127.0.0.1:1/v1"))
    worker = ht.with_password("http://127.0.0.1:2/v1", ht.WORKER_USER, ht.WORKER_PASSWORD)
    monkeypatch.setenv("WORKER_URLS", worker)
    hostile = ht.HOSTILE
    limits = thresholds(tmp_path)
    base = evalgate_sweep(tmp_path / "base", "b", {4: baseline_answers(), 8: baseline_answers()})
    cand = evalgate_sweep(tmp_path / "cand", "c", {4: answers(lost=80), 8: answers()})
    for folder in (*base.iterdir(), *cand.iterdir()):
        result = load_result(folder)
        result["model"] = result["labels"]["hardware"] = hostile
        (folder / "result.json").write_text(json.dumps(result))
        lines = (folder / "samples.jsonl").read_text().splitlines()
        records = [json.loads(line) for line in lines]
        for record in records:
            for answer in record["filters"].values():
                answer["extracted"] = f"{answer['extracted']} {hostile}"
        (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    flags, out = reports(tmp_path)
    code, stdout, stderr = run(
        capsys, cand, "--baseline", base, "--thresholds", limits, "--github", *flags
    )
    assert code == ExitCode.FAIL, stdout
    lines = [*ht.terminal_lines(stdout, "stdout"), *ht.terminal_lines(stderr, "stderr")]
    assert any("x\\n::stop-commands::tok" in line for line in lines)
    ht.markdown_tables(summary.read_text(encoding="utf-8"), "summary")
    assert {case.get("name") for case in ht.junit(out["junit.xml"]).iter("testcase")}
    page = out["page.html"].read_text(encoding="utf-8")
    ht.html_page(page, "page.html")
    assert page.count(ht.INJECTED.replace("<", "&lt;").replace(">", "&gt;")) >= 2
    document = verdict(out["verdict.json"])
    lost = next(e for e in document["entries"] if e["outcome"] == "regression")["versus"]
    assert lost["lost_questions"][0]["candidate_answer"].endswith(ht.scrubbed(hostile))
    for text in (stdout, stderr, page, summary.read_text(), out["junit.xml"].read_text()):
        ht.assert_no_secret(text, "a report")
    ht.assert_no_secret(out["verdict.json"].read_text(), "verdict.json")


@pytest.mark.loopback
def test_verify_against_a_baseline_imports_neither_the_gate_nor_anything_heavy(sweeps):
    """--baseline pairs with compare's modules; verify still starts without a run's stages. (Its
    settings are read by the one Settings model, so pydantic is loaded: not tested here, its
    start-up is measured by benchmarks/suite.py.)"""
    script = (
        "import sys\n"
        "from evalgate.cli import main\n"
        "code = main(sys.argv[1:])\n"
        "loaded = sorted(m for m in sys.modules if m in ('evalgate.run', 'evalgate.hook') or "
        "m.startswith(('evalgate.context', 'evalgate.probe', 'evalgate.eval.', 'lm_eval', "
        "'numpy', 'httpx', 'aiohttp')))\n"
        "print('LOADED', loaded)\n"
        "sys.exit(code)\n"
    )
    args = ["verify", str(sweeps["same"]), "--baseline", str(sweeps["base"])]
    args += ["--thresholds", str(sweeps["thresholds"]), "-q"]
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    assert done.returncode == ExitCode.PASS, done.stdout + done.stderr
    assert "LOADED []" in done.stdout


FIXTURE = Path(__file__).parent / "data" / "baseline-v1"


"""A sweep in the evidence format of today (result.json evalgate.result/1 and samples.jsonl):
kept as it is, and read as a baseline by every future version."""


@pytest.mark.unit
def test_a_sweep_in_todays_format_reads_as_a_baseline_forever(tmp_path, capsys):
    right = [i % 10 != 3 for i in range(50)]
    cand = evalgate_sweep(tmp_path / "cand", "now", {4: right, 8: right}, limit=50, questions=50)
    for result in FIXTURE.rglob("result.json"):
        assert json.loads(result.read_text())["schema"] == "evalgate.result/1"
    limits = thresholds(tmp_path)
    args = [cand, "--baseline", FIXTURE, "--thresholds", limits, "--min-samples", "0"]
    code, stdout, _ = run(capsys, *args)
    assert code == ExitCode.PASS, stdout
    # paired question by question (50 questions: too few to rule out a 2-point drop)
    assert "against the baseline: 2 inconclusive" in stdout
    assert "+0.00 [-7.13, +7.13] strict-match" in stdout


BASELINE_ROWS = """Array.from(document.querySelectorAll('figure.chart')).filter(
  f => f.querySelector('figcaption').innerText.startsWith('Against the baseline')
).map(f => Array.from(f.querySelectorAll('.rows .row')).map(r => r.innerText))[0]"""


BASELINE_MARKS = """(() => {
  const f = Array.from(document.querySelectorAll('figure.chart')).find(
    f => f.querySelector('figcaption').innerText.startsWith('Against the baseline'));
  return [f.querySelectorAll('svg.bar circle.point').length,
          f.querySelectorAll('svg.bar line.ci').length,
          f.querySelectorAll('svg.bar line.margin').length];
})()"""


README_SHOT = Path(__file__).resolve().parents[2] / "docs" / "verify-baseline.png"


@pytest.fixture
def baseline_page(sweeps, tmp_path, capsys) -> Path:
    flags, out = reports(tmp_path)
    args = [sweeps["dropped"], "--baseline", sweeps["base"], "--thresholds", sweeps["thresholds"]]
    code, _, _ = run(capsys, *args, *flags)
    assert code == ExitCode.FAIL
    return out["page.html"]


@pytest.mark.browser
def test_the_browser_shows_each_configs_difference_against_the_margin_regression_first(
    baseline_page, shown
):
    probes = {"rows": BASELINE_ROWS, "marks": BASELINE_MARKS, "text": "document.body.innerText"}
    seen = shown(baseline_page, "verify-baseline", probes, readme=(README_SHOT, 1500))
    rows = [row.split("\n") for row in seen.values["rows"]]
    assert rows[0][:2] == ["REGRESSION", f"conc={DROPPED} 90 lost, 10 gained of 1319"]
    assert rows[0][-1] == "-6.07 [-7.62, -4.70] pts"
    assert [row[0] for row in rows[1:]] == ["EQUIVALENT"] * 4
    assert seen.values["marks"] == [5, 5, 5]  # a dot, an interval and the margin per config
    assert (
        f"Lost questions of {key(DROPPED)} on strict-match (the first 20 of 90)"
        in (seen.values["text"])
    )


@pytest.mark.unit
def test_the_readme_shows_the_baseline_chart():
    readme = (README_SHOT.parents[1] / "README.md").read_text(encoding="utf-8")
    assert "](docs/verify-baseline.png)" in readme
    assert README_SHOT.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _verify(
    *args: str | Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    from tests.conftest import run_subprocess

    return run_subprocess("verify", *map(str, args), env=env)


@pytest.mark.loopback
@pytest.mark.parametrize("suffix", ["json", "yaml"])
def test_a_waiver_repeating_a_key_is_refused_in_json_as_in_yaml(sweeps, tmp_path, suffix):
    """{"config": "other", "config": K}: JSON's reader kept the last and waived K (exit 0)."""
    waivers = tmp_path / f"w.{suffix}"
    entry = f'"config": "other", "config": "{key(DROPPED)}", "reason": "r", "who": "w", '
    entry += '"until": "2999-12-31"'
    waivers.write_text(f"[{{{entry}}}]\n", encoding="utf-8")
    args = [sweeps["dropped"], "--baseline", sweeps["base"], "--thresholds", sweeps["thresholds"]]

    done = _verify(*args, "--waivers", waivers)

    assert done.returncode == ExitCode.USAGE, done.stdout
    assert "repeats the key 'config'" in done.stderr and str(waivers) in done.stderr
    assert done.stdout == ""


@pytest.mark.loopback
@pytest.mark.parametrize(
    "until", ["2099-W01", "20990101", "2099-001", "\u0662\u0660\u0669\u0669-01-01"]
)
@pytest.mark.parametrize("suffix", ["json", "yaml"])
def test_a_waiver_date_is_read_in_the_one_documented_form(sweeps, tmp_path, suffix, until):
    """Python reads 2099-W01 and 20990101 as dates too; the docs say YYYY-MM-DD."""
    waivers = tmp_path / f"w.{suffix}"
    waivers.write_text(
        f'[{{"config": "{key(DROPPED)}", "reason": "r", "who": "w", "until": "{until}"}}]\n',
        encoding="utf-8",
    )
    args = [sweeps["dropped"], "--baseline", sweeps["base"], "--thresholds", sweeps["thresholds"]]

    done = _verify(*args, "--waivers", waivers)

    assert done.returncode == ExitCode.USAGE, done.stdout
    assert (
        f"until is '{until}', not a date. Write the last day the waiver holds as YYYY-MM-DD"
        in done.stderr
    )


@pytest.mark.loopback
@pytest.mark.parametrize("suffix", ["json", "yaml"])
def test_a_waiver_integer_is_bounded_the_same_in_json_and_yaml(sweeps, tmp_path, suffix):
    """308 digits are read (and refused as no text), 309 are past what a float holds."""
    args = [sweeps["dropped"], "--baseline", sweeps["base"], "--thresholds", sweeps["thresholds"]]
    said = []
    for digits in (308, 309, 5000):
        waivers = tmp_path / f"w{digits}.{suffix}"
        waivers.write_text(
            f'[{{"config": "{key(DROPPED)}", "reason": {"9" * digits}, "who": "w", '
            '"until": "2999-12-31"}]\n',
            encoding="utf-8",
        )
        done = _verify(*args, "--waivers", waivers)
        assert done.returncode == ExitCode.USAGE, done.stderr
        assert "InternalError" not in done.stderr
        said.append(done.stderr)
    assert "reason is 999" in said[0] and "not a non-empty text" in said[0]
    assert "holds an integer of 309 digits" in said[1] and "past what a float holds" in said[1]
    assert "holds an integer of 5,000 digits" in said[2]


# verify counts each finding once (each command as its own process).


@pytest.mark.loopback
@pytest.mark.parametrize(
    ("floor", "line"),
    [
        # the regressions are the configs' outcome: counted there, not again
        ("0.85", "3 results for 3 configs: 1 pass, 2 regression; against the baseline: 1 "
         "equivalent"),
        # below their floor: a fail, and (another finding) a regression against the baseline
        ("0.9", "3 results for 3 configs: 1 pass, 2 fail; against the baseline: 2 regression, 1 "
         "equivalent"),
    ],
)  # fmt: skip
def test_verify_counts_each_finding_once(dropped_sweeps, tmp_path, floor, line):
    base, dropped = dropped_sweeps
    limits = tmp_path / "floor.json"
    limits.write_text(f'{{"default": {{"gsm8k": {floor}}}}}', encoding="utf-8")
    done = run_subprocess(
        "verify", str(dropped), "--baseline", str(base), "--thresholds", str(limits), "--no-github"
    )
    assert done.returncode == 1, done.stderr
    last = done.stdout.splitlines()[-1]
    assert last == f"evalgate verify: FAIL (exit 1): {line}"
    assert last.count("regression") == 1


# A config's identity includes its task: a GSM8K run and a GPQA-diamond run of one model, hardware
# and topology are two results in verify's table, in --expect, in --baseline pairing and in every
# report (docs/verify.md, "How a config and a run are identified"); verdicts are
# evalgate.verdict/2, and verdict/1's schema stays, frozen, for the documents already written.


@pytest.mark.loopback
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
