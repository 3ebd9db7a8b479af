"""A run's identity is what it holds, not where it lies (evalgate.evidence.outputs.run_identity):
a copied, renamed or linked run folder is the same run, another run at the same path is
another; a baseline whose runs are the sweep's own is refused (exit 2) naming them.

Black-box: `evalgate verify` runs as its own process on sweeps on disk in both layouts
(tests/verify/sweeps.py); run_identity is also checked on its own, as a history would call it.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import signal
from pathlib import Path

import pytest

from evalgate.errors import ExitCode
from tests.conftest import Sweep, finish, run_subprocess, start_subprocess
from tests.verify.sweeps import (
    answers,
    baseline_answers,
    evalgate_sweep,
    harness_sweep,
    thresholds,
    write_result,
)

CONCS = (4, 8)


def verify(sweep: Path, *baseline: Path) -> tuple[int, str, str]:
    limits = thresholds(sweep.parent)
    done = run_subprocess(
        "verify", str(sweep), "--baseline", *map(str, baseline), "--thresholds", str(limits),
        "--no-github",
    )  # fmt: skip
    return done.returncode, done.stdout, done.stderr


def layouts(root: Path, name: str, *, seed: int = 0) -> dict[str, Path]:
    """A sweep of two configs in evalgate's layout and one in the harness's."""
    outcomes = {c: answers(seed=seed + i) for i, c in enumerate(CONCS)}
    return {
        "evalgate": evalgate_sweep(root / name / "evalgate", name, outcomes),
        "harness": harness_sweep(root / name / "harness", outcomes),
    }


@pytest.fixture(params=["evalgate", "harness"])
def sweep(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    return layouts(tmp_path, "today")[request.param]


@pytest.mark.loopback
def test_a_baseline_that_is_the_sweep_itself_is_refused(sweep):
    code, out, err = verify(sweep, sweep)

    assert code == 2, out + err
    assert f"UsageError: --baseline {sweep} and the sweep's {sweep} are one folder" in err
    assert "NOT COMPARED" not in out


@pytest.mark.loopback
@pytest.mark.parametrize("how", ["copied", "renamed", "linked"])
def test_a_baseline_holding_the_sweeps_own_runs_elsewhere_is_refused(sweep, tmp_path, how):
    """The same runs by what they hold: a copy elsewhere, a renamed copy, a link."""
    other = tmp_path / "downloads" / "last-night"
    other.parent.mkdir()
    if how == "linked":
        other.symlink_to(sweep, target_is_directory=True)
    else:
        shutil.copytree(sweep, other)
        if how == "renamed":
            for folder in sorted(other.iterdir()):
                if folder.is_dir():
                    folder.rename(folder.with_name(f"renamed-{folder.name}"))

    code, out, err = verify(sweep, other)

    assert code == 2, out + err
    if how == "linked":
        assert f"--baseline {other} and the sweep's {sweep} are one folder, or one holds" in err
    else:
        assert f"UsageError: --baseline holds {len(CONCS)} of the sweep's own runs" in err
        assert str(other) in err and str(sweep) in err


@pytest.mark.loopback
def test_one_run_of_the_sweep_copied_into_the_baseline_is_refused_by_name(tmp_path):
    today = layouts(tmp_path, "today")["evalgate"]
    base = evalgate_sweep(tmp_path / "base", "base", {c: baseline_answers() for c in CONCS})
    shutil.rmtree(base / "base-conc8")
    shutil.copytree(today / "today-conc8", base / "base-conc8")

    code, out, err = verify(today, base)

    assert code == 2, out + err
    assert "UsageError: --baseline holds 1 of the sweep's own runs" in err
    assert (
        f"{base / 'base-conc8' / 'result.json'} is {today / 'today-conc8' / 'result.json'}" in err
    )


@pytest.mark.loopback
def test_an_earlier_sweep_is_compared_in_both_layouts(tmp_path):
    """The refusal is for a run compared with itself, not for a real baseline."""
    today = layouts(tmp_path, "today", seed=1)
    base = layouts(tmp_path, "base", seed=5)
    for name in ("evalgate", "harness"):
        code, out, err = verify(today[name], base[name])
        assert code == 0, out + err
        assert f"against the baseline: {len(CONCS)} equivalent" in out


@pytest.mark.loopback
def test_run_identity_is_content_not_path(tmp_path):
    """evalgate's result: its run id, kept by a copy. The harness's lm-eval result: a hash of
    its results and samples, the same for a copy, another for another run at the same path."""
    from evalgate.evidence.outputs import CONTENT, run_identity  # the module a history uses

    today = layouts(tmp_path, "today")
    result = today["evalgate"] / "today-conc4" / "result.json"
    assert run_identity(result) == json.loads(result.read_text())["run_id"]
    copy = tmp_path / "copy"
    shutil.copytree(today["evalgate"] / "today-conc4", copy)
    assert run_identity(copy / "result.json") == run_identity(result)

    (harness,) = today["harness"].glob("results_*_conc4.json")
    first = run_identity(harness)
    assert first.startswith(CONTENT) and len(first) == len(CONTENT) + 64
    shutil.copytree(today["harness"], tmp_path / "harness-copy")
    assert run_identity(tmp_path / "harness-copy" / harness.name) == first

    # last night's download at the same path: the same results file, other answers
    (samples,) = today["harness"].glob("samples_gsm8k_*_conc4.jsonl")
    lines = samples.read_text().splitlines()
    samples.write_text("\n".join(reversed(lines)) + "\n")
    assert run_identity(harness) != first


@pytest.mark.loopback
def test_a_baseline_folder_holding_a_result_given_to_the_sweep_is_refused(tmp_path):
    today = layouts(tmp_path, "today")["evalgate"]
    given = today / "today-conc4" / "result.json"
    limits = thresholds(tmp_path)

    done = run_subprocess(
        "verify", str(given), "--baseline", str(today), "--thresholds", str(limits), "--no-github"
    )

    assert done.returncode == 2, done.stdout + done.stderr
    assert f"--baseline {today} and the sweep's {given} are one folder, or one holds" in done.stderr


@pytest.mark.loopback
@pytest.mark.parametrize("side", ["sweep", "baseline"])
def test_a_run_given_by_another_name_is_still_the_sweeps_own(tmp_path, side):
    """A result.json copied out as run-conc4.json (its samples beside it) and given as the
    sweep, or as the baseline, against the folder it came from: the same run, refused."""
    today = layouts(tmp_path, "today")["evalgate"]
    loose = tmp_path / "loose"
    loose.mkdir()
    renamed = loose / "run-conc4.json"
    shutil.copy(today / "today-conc4" / "result.json", renamed)
    shutil.copy(today / "today-conc4" / "samples.jsonl", loose / "samples.jsonl")
    sweep, base = (renamed, today) if side == "sweep" else (today, renamed)

    code, out, err = verify(sweep, base)

    assert code == 2, out + err
    assert "UsageError: --baseline holds 1 of the sweep's own runs" in err
    assert str(renamed) in err and "NOT COMPARED" not in out


# Evidence is never an output: a report (verify's --json, --junit, --html and job summary,
# compare's --html) onto a file the command reads, onto a run's evidence, or under an evidence
# name anywhere, is refused with exit 2 before anything is written (evalgate.evidence.outputs;
# RELIABILITY.md, "Evidence is never an output").
#
# Black-box: `evalgate` runs as its own process on copies of real runs made against the loopback
# engine; every file of the runs is compared byte for byte before and after.

REPORTS = ("--json", "--junit", "--html")


def checksums(*folders: Path) -> dict[str, str]:
    return {
        str(path): hashlib.sha256(path.read_bytes()).hexdigest()
        for folder in folders
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.name != ".evalgate.lock"
    }


@pytest.fixture
def outputs_sweep(loopback_sweep: Sweep, tmp_path: Path) -> Path:
    """A copy of the loopback sweep (the session's own is shared by other tests)."""
    root = tmp_path / "sweep"
    shutil.copytree(loopback_sweep.root, root, symlinks=True)
    return root


def outputs_verify(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    done = run_subprocess("verify", *args, "--min-samples", "0", env=env)
    return done.returncode, done.stdout, done.stderr


def refused(code: int, out: str, err: str, label: str, path: Path) -> None:
    assert code == 2, out + err
    assert out == ""  # refused before any verdict is printed
    assert f"ArtifactError: {label} {path} " in err


@pytest.mark.loopback
@pytest.mark.parametrize("flag", REPORTS)
@pytest.mark.parametrize("name", ["samples.jsonl", "journal.jsonl", "result.json"])
def test_a_verify_report_onto_a_runs_evidence_is_refused(outputs_sweep, tmp_path, flag, name):
    """verify C --baseline B --json C/r1/samples.jsonl: the samples it pairs, untouched."""
    baseline = tmp_path / "baseline"
    shutil.copytree(outputs_sweep, baseline)
    target = outputs_sweep / "eval_fake_b200_conc4" / name
    before = checksums(outputs_sweep, baseline)

    code, out, err = outputs_verify(
        str(outputs_sweep), "--baseline", str(baseline), flag, str(target)
    )

    refused(code, out, err, flag, target)
    assert f"takes the name of a run's evidence ({name})" in err
    assert checksums(outputs_sweep, baseline) == before


@pytest.mark.loopback
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
def test_a_report_under_an_evidence_name_is_refused_wherever_it_lies(outputs_sweep, tmp_path, name):
    """A new file outside the sweep named as evidence would be read by the next verify."""
    target = tmp_path / "reports" / name

    code, out, err = outputs_verify(str(outputs_sweep), "--json", str(target))

    refused(code, out, err, "--json", target)
    assert not target.exists()


@pytest.mark.loopback
def test_a_report_onto_a_file_verify_reads_is_refused_whatever_its_name(outputs_sweep, tmp_path):
    """The thresholds file, the --expect manifest, the waivers, a result given by another
    name: each refused, each unchanged."""
    thresholds = tmp_path / "limits.json"
    thresholds.write_text(json.dumps({"default": {"gsm8k": 0.9}}))
    manifest = tmp_path / "expected.json"
    manifest.write_text(json.dumps({"count": 6}))
    waivers = tmp_path / "waivers.json"
    waivers.write_text("[]")
    renamed = tmp_path / "run4.json"
    shutil.copy(outputs_sweep / "eval_fake_b200_conc4" / "result.json", renamed)
    hard = tmp_path / "linked.json"
    os.link(thresholds, hard)
    base = ["--thresholds", str(thresholds), "--expect", str(manifest)]
    base += ["--baseline", str(outputs_sweep), "--waivers", str(waivers)]
    inputs = [thresholds, manifest, waivers, renamed]
    before = {path: path.read_bytes() for path in inputs}

    for target in [*inputs, hard]:
        code, out, err = outputs_verify(
            str(outputs_sweep), str(renamed), *base, "--html", str(target)
        )
        refused(code, out, err, "--html", target)
        assert "a file this command reads" in err
    assert {path: path.read_bytes() for path in inputs} == before


@pytest.mark.loopback
def test_a_report_through_a_link_onto_evidence_is_refused(outputs_sweep, tmp_path):
    """A link named report.json to a run's samples: refused by where it leads."""
    samples = outputs_sweep / "eval_fake_b200_conc4" / "samples.jsonl"
    before = samples.read_bytes()
    link = tmp_path / "report.json"
    link.symlink_to(samples)
    linked_folder = tmp_path / "runs"
    linked_folder.symlink_to(outputs_sweep / "eval_fake_b200_conc4", target_is_directory=True)

    for target in (link, linked_folder / "journal.jsonl"):
        code, out, err = outputs_verify(str(outputs_sweep), "--junit", str(target))
        refused(code, out, err, "--junit", target)
    assert samples.read_bytes() == before and link.is_symlink()


@pytest.mark.loopback
def test_the_job_summary_onto_evidence_is_refused(outputs_sweep):
    journal = outputs_sweep / "eval_fake_b200_conc4" / "journal.jsonl"
    before = checksums(outputs_sweep)

    code, out, err = outputs_verify(
        str(outputs_sweep), "--github", env={"GITHUB_STEP_SUMMARY": str(journal)}
    )

    refused(code, out, err, "GITHUB_STEP_SUMMARY", journal)
    assert checksums(outputs_sweep) == before


@pytest.mark.loopback
def test_the_job_summary_onto_another_name_of_evidence_is_refused(outputs_sweep, tmp_path):
    """A hard link to a run's result under an innocent name: appending would change both."""
    result = outputs_sweep / "eval_fake_b200_conc4" / "result.json"
    summary = tmp_path / "summary.md"
    os.link(result, summary)
    before = result.read_bytes()

    code, out, err = outputs_verify(
        str(outputs_sweep), "--github", env={"GITHUB_STEP_SUMMARY": str(summary)}
    )

    refused(code, out, err, "GITHUB_STEP_SUMMARY", summary)
    assert "has other names (hard links)" in err
    assert result.read_bytes() == before


@pytest.mark.loopback
def test_two_reports_onto_one_file_are_refused(outputs_sweep, tmp_path):
    target = tmp_path / "report.out"

    code, out, err = outputs_verify(
        str(outputs_sweep), "--json", str(target), "--html", str(target)
    )

    refused(code, out, err, "--html", target)
    assert "is the file --json writes too" in err
    assert not target.exists()


@pytest.mark.loopback
@pytest.mark.parametrize("name", ["result.json", "samples.jsonl", "journal.jsonl"])
def test_a_compare_page_onto_either_runs_evidence_is_refused(outputs_sweep, name):
    """compare B C --html C/result.json: the candidate's result stays a result."""
    baseline, candidate = (
        outputs_sweep / "eval_fake_b200_conc4",
        outputs_sweep / "eval_fake_h100_conc4",
    )
    before = checksums(outputs_sweep)

    for target in (candidate / name, baseline / name):
        done = run_subprocess("compare", str(baseline), str(candidate), "--html", str(target))
        refused(done.returncode, done.stdout, done.stderr, "--html", target)
    assert checksums(outputs_sweep) == before


@pytest.mark.loopback
def test_a_compare_page_onto_a_result_given_by_another_name_is_refused(outputs_sweep, tmp_path):
    given = tmp_path / "candidate.json"
    shutil.copy(outputs_sweep / "eval_fake_h100_conc4" / "result.json", given)
    shutil.copy(
        outputs_sweep / "eval_fake_h100_conc4" / "samples.jsonl", tmp_path / "samples.jsonl"
    )
    before = given.read_bytes()

    done = run_subprocess(
        "compare", str(outputs_sweep / "eval_fake_b200_conc4"), str(given), "--html", str(given)
    )

    refused(done.returncode, done.stdout, done.stderr, "--html", given)
    assert "a file this command reads" in done.stderr
    assert given.read_bytes() == before


@pytest.mark.loopback
def test_reports_beside_the_evidence_are_written(outputs_sweep):
    """The rule refuses evidence, not the folder: a page next to the results is fine."""
    page, verdict = outputs_sweep / "verify.html", outputs_sweep / "verdict.json"

    code, out, err = outputs_verify(str(outputs_sweep), "--html", str(page), "--json", str(verdict))

    assert code == 1, out + err  # the sweep holds a failing, an errored and a malformed run
    assert page.read_text().startswith("<!DOCTYPE html>")
    assert json.loads(verdict.read_text())["exit_code"] == 1


@pytest.mark.loopback
def test_a_refused_report_leaves_no_folder_for_the_others(outputs_sweep, tmp_path):
    """The refusals come before any report's folder is made."""
    junit, verdict = tmp_path / "new" / "junit.xml", tmp_path / "out" / "result.json"

    code, out, err = outputs_verify(
        str(outputs_sweep), "--junit", str(junit), "--json", str(verdict)
    )

    refused(code, out, err, "--json", verdict)
    assert not junit.parent.exists() and not verdict.parent.exists()


@pytest.mark.loopback
def test_a_report_onto_the_sweeps_folder_is_a_folder_not_an_input(outputs_sweep):
    code, out, err = outputs_verify(str(outputs_sweep), "--html", str(outputs_sweep))

    assert code == 2, out + err
    assert f"Cannot write {outputs_sweep}: it is a folder (--html)." in err


@pytest.mark.loopback
def test_a_report_onto_the_file_a_runs_evidence_links_to_is_refused(outputs_sweep, tmp_path):
    """A run's result and samples kept as links into a store (a cache, an annex): a report
    onto the stored file, by its own name, would replace or extend that evidence all the same."""
    run, other = outputs_sweep / "eval_fake_b200_conc4", outputs_sweep / "eval_fake_h100_conc4"
    store = tmp_path / "store"
    store.mkdir()
    for name, blob in (("result.json", "3f2a"), ("samples.jsonl", "9c1d")):
        (run / name).rename(store / blob)
        (run / name).symlink_to(store / blob)
    before = checksums(outputs_sweep, store)

    code, out, err = outputs_verify(str(outputs_sweep), "--json", str(store / "3f2a"))
    refused(code, out, err, "--json", store / "3f2a")
    assert f"is {run / 'result.json'}, a file this command reads" in err
    summary = {"GITHUB_STEP_SUMMARY": str(store / "9c1d")}
    code, out, err = outputs_verify(str(outputs_sweep), "--github", env=summary)
    refused(code, out, err, "GITHUB_STEP_SUMMARY", store / "9c1d")
    for given in (run, run / "result.json"):  # the folder, or its result: the samples beside
        done = run_subprocess("compare", str(other), str(given), "--html", str(store / "9c1d"))
        refused(done.returncode, done.stdout, done.stderr, "--html", store / "9c1d")
    assert checksums(outputs_sweep, store) == before


@pytest.mark.loopback
@pytest.mark.parametrize("name", ["Result.json", "SAMPLES.JSONL", "Journal.jsonl"])
def test_a_report_onto_evidence_spelled_in_another_case_is_refused(outputs_sweep, name):
    """On a file system that ignores case (macOS's, Windows', a FAT stick) Samples.JSONL is
    the run's samples.jsonl: refused on every file system alike."""
    target = outputs_sweep / "eval_fake_b200_conc4" / name
    before = checksums(outputs_sweep)

    code, out, err = outputs_verify(str(outputs_sweep), "--html", str(target))

    refused(code, out, err, "--html", target)
    assert f"takes the name of a run's evidence ({name})" in err
    assert checksums(outputs_sweep) == before


# verify's reports: written through a FIFO or link, never over an input, whole or not at all.


@pytest.mark.usefixtures("verify_only")
@pytest.mark.unit
@pytest.mark.parametrize("flag", ["--junit", "--json", "GITHUB_STEP_SUMMARY"])
@pytest.mark.parametrize("where", ["under a file", "a folder"])
def test_an_unwritable_output_is_refused_before_any_verdict_is_printed(
    tmp_path, cli, monkeypatch, flag, where
):
    write_result(tmp_path / "runs" / "a")
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a folder\n")
    target = blocker / "out.xml" if where == "under a file" else tmp_path
    args = [str(tmp_path / "runs")]
    if flag == "GITHUB_STEP_SUMMARY":
        monkeypatch.setenv("GITHUB_ACTIONS", "true")
        monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
    else:
        args += [flag, str(target)]

    code, out, err = cli("verify", *args)

    assert code == ExitCode.USAGE
    assert out == ""  # no verdict printed that the exit code would then contradict
    assert f"Cannot write {target}: " in err and f"({flag}). Pass a writable path." in err


@pytest.mark.loopback
@pytest.mark.parametrize("flag", ["--junit", "--json", "--html"])
def test_a_report_whose_write_fails_midway_leaves_the_old_report_whole(tmp_path, flag):
    """A write cut off partway (here the file-size limit, as a full disk or a kill would) never
    leaves half a report: the earlier report stays as it was, and no temporary file is left."""
    write_result(tmp_path / "runs" / "a")
    target = tmp_path / "reports" / "report"
    target.parent.mkdir()
    target.write_text("the earlier report\n")
    limit = 256  # every report of one result is longer

    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an over-long write fails, not kills
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    done = finish(
        start_subprocess(
            "verify",
            str(tmp_path / "runs"),
            flag,
            str(target),
            env={"PYTHONDONTWRITEBYTECODE": "1"},
            preexec_fn=limited,
        ),
        120,
    )

    # the verdict's exit code stands, and the verdict line, printed last, says what is missing
    assert done.code == ExitCode.PASS, done.err
    assert f"ArtifactError: Cannot write {target}: File too large ({flag})." in done.err
    assert done.out.splitlines()[-1].startswith("evalgate verify: PASS (exit 0): ")
    assert done.out.splitlines()[-1].endswith(f"; not written (see above): {flag} {target}")
    assert target.read_text() == "the earlier report\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["report"]


@pytest.mark.loopback
def test_a_report_to_a_fifo_is_written_through_it_not_replaced_by_a_file(tmp_path):
    """`--json /dev/stdout`, `--json >(jq .)`: a stream is written as it is; replacing it with a
    file would lose the report (and, as root, /dev/stdout itself)."""
    write_result(tmp_path / "runs" / "a")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # open first: verify's open never waits
    try:
        done = run_subprocess("verify", str(tmp_path / "runs"), "--json", str(fifo))
        written = os.read(reader, 1 << 16).decode()  # one result's verdict fits the pipe
    finally:
        os.close(reader)

    assert done.returncode == ExitCode.PASS, done.stderr
    assert json.loads(written)["verdict"] == "pass"
    assert fifo.is_fifo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe", "runs"]


@pytest.mark.usefixtures("verify_only")
@pytest.mark.unit
def test_a_report_through_a_link_is_written_to_the_file_it_names_keeping_its_mode(tmp_path, cli):
    write_result(tmp_path / "runs" / "a")
    shared = tmp_path / "shared" / "verdict.json"
    shared.parent.mkdir()
    shared.write_text("the earlier report\n")
    shared.chmod(0o600)
    link = tmp_path / "verdict.json"
    link.symlink_to(shared)

    code, _, err = cli("verify", str(tmp_path / "runs"), "--json", str(link))

    assert code == ExitCode.PASS, err
    assert link.is_symlink()
    assert json.loads(shared.read_text())["verdict"] == "pass"
    assert shared.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in shared.parent.iterdir()) == ["verdict.json"]


@pytest.mark.usefixtures("verify_only")
@pytest.mark.unit
def test_a_report_through_a_link_to_an_input_is_refused(tmp_path, cli):
    result = write_result(tmp_path / "runs" / "a")
    before = result.read_bytes()
    link = tmp_path / "report.json"
    link.symlink_to(result)

    code, out, err = cli("verify", str(tmp_path / "runs"), "--json", str(link))

    assert code == ExitCode.USAGE
    assert f"--json {link} takes the name of a run's evidence" in err
    assert out == ""
    assert result.read_bytes() == before and link.is_symlink()


@pytest.mark.usefixtures("verify_only")
@pytest.mark.unit
@pytest.mark.parametrize("flag", ["--json", "--junit"])
def test_a_report_that_would_overwrite_an_input_is_refused(tmp_path, cli, flag):
    result = write_result(tmp_path / "runs" / "a")
    before = result.read_bytes()

    code, out, err = cli("verify", str(tmp_path / "runs"), flag, str(result))

    assert code == ExitCode.USAGE
    assert f"{flag} {result} takes the name of a run's evidence" in err
    assert out == ""
    assert result.read_bytes() == before
