"""A run's identity is what it holds, not where it lies (evalgate.evidence.outputs.run_identity):
a copied, renamed or linked run folder is the same run, another run at the same path is
another; a baseline whose runs are the sweep's own is refused (exit 2) naming them.

Black-box: `evalgate verify` runs as its own process on sweeps on disk in both layouts
(tests/verify/sweeps.py); run_identity is also checked on its own, as a history would call it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import run_subprocess
from tests.verify.sweeps import answers, baseline_answers, evalgate_sweep, harness_sweep, thresholds

pytestmark = pytest.mark.loopback

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


def test_a_baseline_that_is_the_sweep_itself_is_refused(sweep):
    code, out, err = verify(sweep, sweep)

    assert code == 2, out + err
    assert f"UsageError: --baseline {sweep} and the sweep's {sweep} are one folder" in err
    assert "NOT COMPARED" not in out


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


def test_an_earlier_sweep_is_compared_in_both_layouts(tmp_path):
    """The refusal is for a run compared with itself, not for a real baseline."""
    today = layouts(tmp_path, "today", seed=1)
    base = layouts(tmp_path, "base", seed=5)
    for name in ("evalgate", "harness"):
        code, out, err = verify(today[name], base[name])
        assert code == 0, out + err
        assert f"against the baseline: {len(CONCS)} equivalent" in out


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


def test_a_baseline_folder_holding_a_result_given_to_the_sweep_is_refused(tmp_path):
    today = layouts(tmp_path, "today")["evalgate"]
    given = today / "today-conc4" / "result.json"
    limits = thresholds(tmp_path)

    done = run_subprocess(
        "verify", str(given), "--baseline", str(today), "--thresholds", str(limits), "--no-github"
    )

    assert done.returncode == 2, done.stdout + done.stderr
    assert f"--baseline {today} and the sweep's {given} are one folder, or one holds" in done.stderr


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
