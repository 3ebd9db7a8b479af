"""Evidence is never an output: a report (verify's --json, --junit, --html and job summary,
compare's --html) onto a file the command reads, onto a run's evidence, or under an evidence
name anywhere, is refused with exit 2 before anything is written (evalgate.evidence.outputs;
RELIABILITY.md, "Evidence is never an output").

Black-box: `evalgate` runs as its own process on copies of real runs made against the loopback
engine; every file of the runs is compared byte for byte before and after.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import Sweep, run_subprocess

pytestmark = pytest.mark.loopback

REPORTS = ("--json", "--junit", "--html")


def checksums(*folders: Path) -> dict[str, str]:
    return {
        str(path): hashlib.sha256(path.read_bytes()).hexdigest()
        for folder in folders
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.name != ".evalgate.lock"
    }


@pytest.fixture
def sweep(loopback_sweep: Sweep, tmp_path: Path) -> Path:
    """A copy of the loopback sweep (the session's own is shared by other tests)."""
    root = tmp_path / "sweep"
    shutil.copytree(loopback_sweep.root, root, symlinks=True)
    return root


def verify(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    done = run_subprocess("verify", *args, "--min-samples", "0", env=env)
    return done.returncode, done.stdout, done.stderr


def refused(code: int, out: str, err: str, label: str, path: Path) -> None:
    assert code == 2, out + err
    assert out == ""  # refused before any verdict is printed
    assert f"ArtifactError: {label} {path} " in err


@pytest.mark.parametrize("flag", REPORTS)
@pytest.mark.parametrize("name", ["samples.jsonl", "journal.jsonl", "result.json"])
def test_a_verify_report_onto_a_runs_evidence_is_refused(sweep, tmp_path, flag, name):
    """verify C --baseline B --json C/r1/samples.jsonl: the samples it pairs, untouched."""
    baseline = tmp_path / "baseline"
    shutil.copytree(sweep, baseline)
    target = sweep / "eval_fake_b200_conc4" / name
    before = checksums(sweep, baseline)

    code, out, err = verify(str(sweep), "--baseline", str(baseline), flag, str(target))

    refused(code, out, err, flag, target)
    assert f"takes the name of a run's evidence ({name})" in err
    assert checksums(sweep, baseline) == before


@pytest.mark.parametrize(
    "name",
    [
        "meta_env.json",
        "hook.json",
        "results.json",
        "results_2026-01-01T00-00-00_conc4.json",
        "samples_gsm8k_2026-01-01T00-00-00_conc4.jsonl",
        "lm_eval_results.json",
        "comparison.json",
    ],
)
def test_a_report_under_an_evidence_name_is_refused_wherever_it_lies(sweep, tmp_path, name):
    """A new file outside the sweep named as evidence would be read by the next verify."""
    target = tmp_path / "reports" / name

    code, out, err = verify(str(sweep), "--json", str(target))

    refused(code, out, err, "--json", target)
    assert not target.exists()


def test_a_report_onto_a_file_verify_reads_is_refused_whatever_its_name(sweep, tmp_path):
    """The thresholds file, the --expect manifest, the waivers, a result given by another
    name: each refused, each unchanged."""
    thresholds = tmp_path / "limits.json"
    thresholds.write_text(json.dumps({"default": {"gsm8k": 0.9}}))
    manifest = tmp_path / "expected.json"
    manifest.write_text(json.dumps({"count": 6}))
    waivers = tmp_path / "waivers.json"
    waivers.write_text("[]")
    renamed = tmp_path / "run4.json"
    shutil.copy(sweep / "eval_fake_b200_conc4" / "result.json", renamed)
    hard = tmp_path / "linked.json"
    os.link(thresholds, hard)
    base = ["--thresholds", str(thresholds), "--expect", str(manifest)]
    base += ["--baseline", str(sweep), "--waivers", str(waivers)]
    inputs = [thresholds, manifest, waivers, renamed]
    before = {path: path.read_bytes() for path in inputs}

    for target in [*inputs, hard]:
        code, out, err = verify(str(sweep), str(renamed), *base, "--html", str(target))
        refused(code, out, err, "--html", target)
        assert "a file this command reads" in err
    assert {path: path.read_bytes() for path in inputs} == before


def test_a_report_through_a_link_onto_evidence_is_refused(sweep, tmp_path):
    """A link named report.json to a run's samples: refused by where it leads."""
    samples = sweep / "eval_fake_b200_conc4" / "samples.jsonl"
    before = samples.read_bytes()
    link = tmp_path / "report.json"
    link.symlink_to(samples)
    linked_folder = tmp_path / "runs"
    linked_folder.symlink_to(sweep / "eval_fake_b200_conc4", target_is_directory=True)

    for target in (link, linked_folder / "journal.jsonl"):
        code, out, err = verify(str(sweep), "--junit", str(target))
        refused(code, out, err, "--junit", target)
    assert samples.read_bytes() == before and link.is_symlink()


def test_the_job_summary_onto_evidence_is_refused(sweep):
    journal = sweep / "eval_fake_b200_conc4" / "journal.jsonl"
    before = checksums(sweep)

    code, out, err = verify(str(sweep), "--github", env={"GITHUB_STEP_SUMMARY": str(journal)})

    refused(code, out, err, "GITHUB_STEP_SUMMARY", journal)
    assert checksums(sweep) == before


def test_the_job_summary_onto_another_name_of_evidence_is_refused(sweep, tmp_path):
    """A hard link to a run's result under an innocent name: appending would change both."""
    result = sweep / "eval_fake_b200_conc4" / "result.json"
    summary = tmp_path / "summary.md"
    os.link(result, summary)
    before = result.read_bytes()

    code, out, err = verify(str(sweep), "--github", env={"GITHUB_STEP_SUMMARY": str(summary)})

    refused(code, out, err, "GITHUB_STEP_SUMMARY", summary)
    assert "has other names (hard links)" in err
    assert result.read_bytes() == before


def test_two_reports_onto_one_file_are_refused(sweep, tmp_path):
    target = tmp_path / "report.out"

    code, out, err = verify(str(sweep), "--json", str(target), "--html", str(target))

    refused(code, out, err, "--html", target)
    assert "is the file --json writes too" in err
    assert not target.exists()


@pytest.mark.parametrize("name", ["result.json", "samples.jsonl", "journal.jsonl"])
def test_a_compare_page_onto_either_runs_evidence_is_refused(sweep, name):
    """compare B C --html C/result.json: the candidate's result stays a result."""
    baseline, candidate = sweep / "eval_fake_b200_conc4", sweep / "eval_fake_h100_conc4"
    before = checksums(sweep)

    for target in (candidate / name, baseline / name):
        done = run_subprocess("compare", str(baseline), str(candidate), "--html", str(target))
        refused(done.returncode, done.stdout, done.stderr, "--html", target)
    assert checksums(sweep) == before


def test_a_compare_page_onto_a_result_given_by_another_name_is_refused(sweep, tmp_path):
    given = tmp_path / "candidate.json"
    shutil.copy(sweep / "eval_fake_h100_conc4" / "result.json", given)
    shutil.copy(sweep / "eval_fake_h100_conc4" / "samples.jsonl", tmp_path / "samples.jsonl")
    before = given.read_bytes()

    done = run_subprocess(
        "compare", str(sweep / "eval_fake_b200_conc4"), str(given), "--html", str(given)
    )

    refused(done.returncode, done.stdout, done.stderr, "--html", given)
    assert "a file this command reads" in done.stderr
    assert given.read_bytes() == before


def test_reports_beside_the_evidence_are_written(sweep):
    """The rule refuses evidence, not the folder: a page next to the results is fine."""
    page, verdict = sweep / "verify.html", sweep / "verdict.json"

    code, out, err = verify(str(sweep), "--html", str(page), "--json", str(verdict))

    assert code == 1, out + err  # the sweep holds a failing, an errored and a malformed run
    assert page.read_text().startswith("<!DOCTYPE html>")
    assert json.loads(verdict.read_text())["exit_code"] == 1


def test_a_refused_report_leaves_no_folder_for_the_others(sweep, tmp_path):
    """The refusals come before any report's folder is made."""
    junit, verdict = tmp_path / "new" / "junit.xml", tmp_path / "out" / "result.json"

    code, out, err = verify(str(sweep), "--junit", str(junit), "--json", str(verdict))

    refused(code, out, err, "--json", verdict)
    assert not junit.parent.exists() and not verdict.parent.exists()


def test_a_report_onto_the_sweeps_folder_is_a_folder_not_an_input(sweep):
    code, out, err = verify(str(sweep), "--html", str(sweep))

    assert code == 2, out + err
    assert f"Cannot write {sweep}: it is a folder (--html)." in err


def test_a_report_onto_the_file_a_runs_evidence_links_to_is_refused(sweep, tmp_path):
    """A run's result and samples kept as links into a store (a cache, an annex): a report
    onto the stored file, by its own name, would replace or extend that evidence all the same."""
    run, other = sweep / "eval_fake_b200_conc4", sweep / "eval_fake_h100_conc4"
    store = tmp_path / "store"
    store.mkdir()
    for name, blob in (("result.json", "3f2a"), ("samples.jsonl", "9c1d")):
        (run / name).rename(store / blob)
        (run / name).symlink_to(store / blob)
    before = checksums(sweep, store)

    code, out, err = verify(str(sweep), "--json", str(store / "3f2a"))
    refused(code, out, err, "--json", store / "3f2a")
    assert f"is {run / 'result.json'}, a file this command reads" in err
    summary = {"GITHUB_STEP_SUMMARY": str(store / "9c1d")}
    code, out, err = verify(str(sweep), "--github", env=summary)
    refused(code, out, err, "GITHUB_STEP_SUMMARY", store / "9c1d")
    for given in (run, run / "result.json"):  # the folder, or its result: the samples beside
        done = run_subprocess("compare", str(other), str(given), "--html", str(store / "9c1d"))
        refused(done.returncode, done.stdout, done.stderr, "--html", store / "9c1d")
    assert checksums(sweep, store) == before


@pytest.mark.parametrize("name", ["Result.json", "SAMPLES.JSONL", "Journal.jsonl"])
def test_a_report_onto_evidence_spelled_in_another_case_is_refused(sweep, name):
    """On a file system that ignores case (macOS's, Windows', a FAT stick) Samples.JSONL is
    the run's samples.jsonl: refused on every file system alike."""
    target = sweep / "eval_fake_b200_conc4" / name
    before = checksums(sweep)

    code, out, err = verify(str(sweep), "--html", str(target))

    refused(code, out, err, "--html", target)
    assert f"takes the name of a run's evidence ({name})" in err
    assert checksums(sweep) == before
