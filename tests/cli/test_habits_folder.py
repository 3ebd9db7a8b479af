"""The habits a user brings, each as its own process against the loopback engine: a run by hand
without --output-dir gets a folder of its own (as lm-eval gives each run its own files), a
named folder and the hook still refuse an earlier result, --resume and --overwrite need a
named folder, what is missing is said before the folder's state, verify counts each finding
once, and every report names the task as --task does (gsm8k, not lm-eval's
gsm8k_evalgate_chat)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from evalgate.evidence.folder import LOCK_NAME
from tests.compare.test_compare import paired_outcomes, write_run
from tests.conftest import SHORT, checksums, load_result, run_args, run_subprocess
from tests.fakeengine import EngineBehaviour, FakeEngine
from tests.verify.sweeps import thresholds

pytestmark = pytest.mark.loopback

OWN = re.compile(r"^output: (evalgate-results/run-\d{8}-\d{6}(?:-\d+)?) \(this run's own; ", re.M)


def made_folder(stderr: str) -> str:
    found = OWN.search(stderr)
    assert found is not None, stderr
    return found.group(1)


# -- the output folder -------------------------------------------------------------------------


def test_each_run_by_hand_without_output_dir_gets_a_fresh_folder_of_its_own(tmp_path):
    with FakeEngine(EngineBehaviour(max_model_len=4096)) as engine:
        runs = [run_subprocess(*run_args(engine.url, None, *SHORT), cwd=tmp_path) for _ in "ab"]
    for done in runs:
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("PASS: ")
    first, second = (made_folder(done.stderr) for done in runs)
    assert first != second
    for done, folder in zip(runs, (first, second), strict=True):
        assert f"result: {folder}/result.json" in done.stderr
        assert load_result(tmp_path / folder)["status"] == "pass"
    assert sorted(p.name for p in (tmp_path / "evalgate-results").iterdir()) == sorted(
        Path(f).name for f in (first, second)
    )


@pytest.mark.parametrize("how", ["flag", "variable", "config file"])
def test_a_named_folder_still_refuses_a_second_run(tmp_path, how):
    """--output-dir, EVALGATE_OUTPUT_DIR and a config file's output-dir: each names the folder,
    and a second run into it is refused as before, its files unchanged."""
    out = tmp_path / "named"
    config = tmp_path / "evalgate.yaml"
    config.write_text(f"output-dir: {out}\n", encoding="utf-8")
    named = {
        "flag": (("--output-dir", str(out)), {}),
        "variable": ((), {"EVALGATE_OUTPUT_DIR": str(out)}),
        "config file": (("--config", str(config)), {}),
    }
    extra, env = named[how]
    with FakeEngine(EngineBehaviour(max_model_len=4096)) as engine:
        args = run_args(engine.url, None, *SHORT, *extra)
        first = run_subprocess(*args, env=env, cwd=tmp_path)
        assert first.returncode == 0, first.stderr
        before = checksums(out)
        asked = len(engine.requests)
        again = run_subprocess(*args, env=env, cwd=tmp_path)
        assert len(engine.requests) == asked
    assert again.returncode == 2
    assert f"{out / 'result.json'} already holds a result (status pass)" in again.stderr
    assert "output: " not in first.stderr + again.stderr
    assert checksums(out) == before
    assert not (tmp_path / "evalgate-results").exists()


def test_the_hook_without_output_dir_keeps_its_staging_folder_and_its_refusal(tmp_path):
    with FakeEngine(EngineBehaviour(max_model_len=4096)) as engine:
        args = ["hook", *run_args(engine.url, None, *SHORT)[1:]]
        first = run_subprocess(*args, cwd=tmp_path)
        assert first.returncode == 0, first.stderr
        stage = tmp_path / "evalgate-results"
        before = checksums(stage)
        again = run_subprocess(*args, cwd=tmp_path)
    assert load_result(stage / "conc-8")["status"] == "pass"
    assert again.returncode == 2
    assert "conc-8/result.json already holds a result (status pass)" in again.stderr
    assert checksums(stage) == before


@pytest.mark.parametrize("flag", ["--resume", "--overwrite"])
def test_resume_and_overwrite_need_a_named_folder(tmp_path, flag):
    with FakeEngine(EngineBehaviour(max_model_len=4096)) as engine:
        refused = run_subprocess(*run_args(engine.url, None, *SHORT, flag), cwd=tmp_path)
        assert engine.requests == []
        named = run_subprocess(
            *run_args(engine.url, None, *SHORT, flag),
            env={"EVALGATE_OUTPUT_DIR": str(tmp_path / "named")},
            cwd=tmp_path,
        )
    assert refused.returncode == 2
    assert (
        f"UsageError: {flag} (set by {flag}) needs --output-dir: without it, each run writes "
        "into a fresh folder of its own, where there is nothing to continue or replace. Name "
        "the run's folder with --output-dir, EVALGATE_OUTPUT_DIR or `output-dir:` in the config "
        "file." in refused.stderr
    )
    assert list(tmp_path.iterdir()) == [tmp_path / "named"]  # the refused run made nothing
    assert named.returncode == 0, named.stderr  # a named folder: nothing to continue, a new run
    assert load_result(tmp_path / "named")["status"] == "pass"


# -- what is missing comes before the folder's state ---------------------------------------------


def test_a_run_with_no_arguments_says_what_is_missing_and_makes_no_folder(tmp_path):
    done = run_subprocess("run", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("UsageError: Missing --base-url, --model: set the flag(s)")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("named", [False, True])
def test_what_is_missing_is_said_before_a_folder_that_holds_a_result(tmp_path, named):
    """A folder with a finished run in it (the default one a run before 0.2.0 wrote, or one
    named): `run` without its endpoint says what is missing, not that the folder is taken;
    every file stays as it was."""
    folder = tmp_path / "evalgate-results"
    with FakeEngine(EngineBehaviour(max_model_len=4096)) as engine:
        first = run_subprocess(*run_args(engine.url, folder, *SHORT))
    assert first.returncode == 0, first.stderr
    before = checksums(folder)
    extra = ["--output-dir", str(folder)] if named else []
    done = run_subprocess("run", "--isl", "1024", *extra, cwd=tmp_path)
    assert done.returncode == 2
    assert "UsageError: Missing --base-url, --model: set the flag(s)" in done.stderr
    assert "already holds a result" not in done.stderr
    assert checksums(folder) == before
    assert sorted(p.name for p in folder.iterdir() if p.name != LOCK_NAME) == sorted(before)


def test_the_hook_says_what_is_missing_before_a_staged_result(tmp_path):
    with FakeEngine(EngineBehaviour(max_model_len=4096)) as engine:
        args = run_args(engine.url, tmp_path / "stage", *SHORT)
        first = run_subprocess("hook", *args[1:])
    assert first.returncode == 0, first.stderr
    before = checksums(tmp_path / "stage")
    done = run_subprocess("hook", "--output-dir", str(tmp_path / "stage"), "--num-concurrent", "8")
    assert done.returncode == 2
    assert "UsageError: Missing --base-url, --model: set the flag(s)" in done.stderr
    assert checksums(tmp_path / "stage") == before


# -- verify: each finding counted once; the task as the user knows it ----------------------------


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
