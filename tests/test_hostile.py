"""Hostile environments, end to end: signals, closed and full streams, full and read-only disks.

Each test runs `evalgate` as a user's shell or a scheduler would (its own process where the
condition is the process's: a signal, a closed stderr, stdout on a full device) against the fake
engine on 127.0.0.1, and checks what a user sees: the exit code, the one-line message, and that
result.json on disk tells the same story, validated against its schema. RELIABILITY.md lists
each condition with its test.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import (
    EVALGATE,
    child_env,
    deadline,
    load_result,
    run_args,
    run_settings,
    run_subprocess,
    start_subprocess,
)
from tests.fakeengine import REPO_ROOT, Fault
from tests.folders import HOSTILE_LIMIT, HOSTILE_RUN, mount, umount

pytestmark = pytest.mark.loopback

MODEL = "fake-model"
BASH = shutil.which("bash") or "/bin/bash"
NOT_PROBE = frozenset(range(2, 100_000))
"""`Fault.nth` that spares the first generation request: the pre-flight probe."""


# -- signals: whatever a terminal or a scheduler sends, the result is written ----------------------

SIGNALS = [
    (signal.SIGTERM, "a scheduler's stop (Slurm, Kubernetes)"),
    (signal.SIGHUP, "an ssh or tmux session dropped"),
    (signal.SIGQUIT, "Ctrl-\\ on a terminal"),
    (signal.SIGUSR1, "a scheduler's warning before the time limit"),
    (signal.SIGINT, "Ctrl-C"),
]


@pytest.mark.parametrize("signum", [s for s, _ in SIGNALS], ids=[s.name for s, _ in SIGNALS])
def test_a_signal_mid_eval_writes_an_aborted_result_with_the_answers(engine, tmp_path, signum):
    engine.inject(Fault("hang", nth=NOT_PROBE - {2, 3}))  # two answers, then silence
    out = tmp_path / "run"
    with deadline(90, engine):
        child = start_subprocess(*run_args(engine.url, out, **HOSTILE_RUN))
        try:
            assert engine.wait_until(lambda e: e.hanging >= 2, timeout=60)
            child.send_signal(signum)
            stdout, stderr = child.communicate(timeout=30)
        finally:
            child.kill()

    assert child.returncode == 6, stderr
    assert "AbortedError: interrupted by a signal" in stderr
    assert "Traceback" not in stderr
    assert stdout == ""  # no verdict: the error is said once, on stderr
    doc = load_result(out)
    assert (doc["status"], doc["stage"], doc["exit_code"]) == ("aborted", "eval", 6)
    journal = (out / "journal.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(journal) == 1 + 2
    samples = (out / "samples.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(samples) == 2


# -- the terminal: closed or full streams ---------------------------------------------------------


def shell(command: str, *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    """`evalgate ARGS` started by bash with the redirections in `command` ("$@" is evalgate)."""
    return subprocess.run(
        [BASH, "-c", command, "evalgate", *EVALGATE, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=child_env(),
        cwd=REPO_ROOT,
        check=False,
    )


def test_a_run_with_stderr_closed_still_passes_and_records_it(engine, tmp_path):
    out = tmp_path / "run"
    with deadline(90, engine):
        done = shell('"$@" 2>&-', *run_args(engine.url, out, **HOSTILE_RUN))

    assert done.returncode == 0, done.stdout
    assert done.stdout.startswith("PASS: ")
    assert load_result(out)["status"] == "pass"


def test_an_error_with_stderr_closed_still_has_its_exit_code_and_result(engine, tmp_path):
    out = tmp_path / "run"
    with deadline(90, engine):
        done = shell(
            '"$@" 2>&-', *run_args(engine.url, out, thresholds=tmp_path / "no", **HOSTILE_RUN)
        )

    assert done.returncode == 2
    assert "InternalError" not in done.stdout
    assert load_result(out)["stage"] == "thresholds"
    assert engine.log == []


@pytest.mark.parametrize("command", ["verify", "compare", "context"])
def test_other_commands_with_stderr_closed_keep_their_exit_code(tmp_path, command):
    args = {
        "verify": ["verify", str(tmp_path)],
        "compare": ["compare", str(tmp_path / "a"), str(tmp_path / "b")],
        "context": ["context", "--isl", "1024", "--osl", "1024"],
    }[command]
    done = shell('"$@" 2>&-', *args)

    assert done.returncode == {"verify": 1, "compare": 2, "context": 2}[command], done.stdout
    assert "InternalError" not in done.stdout


def test_a_run_with_stdout_on_a_full_device_keeps_the_recorded_verdicts_exit_code(engine, tmp_path):
    out = tmp_path / "run"
    with deadline(90, engine):
        done = shell('"$@" >/dev/full', *run_args(engine.url, out, json="-", **HOSTILE_RUN))

    doc = load_result(out)
    assert (doc["status"], doc["exit_code"]) == ("pass", 0)
    assert done.returncode == doc["exit_code"], done.stderr
    assert "could not write to stdout (No space left on device)" in done.stderr
    assert "result.json holds the verdict" in done.stderr
    assert "Traceback" not in done.stderr and "please report it" not in done.stderr


def test_a_run_with_stdout_and_stderr_on_a_full_device_keeps_its_exit_code(engine, tmp_path):
    out = tmp_path / "run"
    with deadline(90, engine):
        done = shell('"$@" >/dev/full 2>/dev/full', *run_args(engine.url, out, **HOSTILE_RUN))

    assert done.returncode == 0
    assert load_result(out)["status"] == "pass"


def test_context_with_stdout_on_a_full_device_is_an_error_not_a_silent_success():
    done = shell(
        '"$@" >/dev/full',
        "context",
        "--isl",
        "1024",
        "--osl",
        "1024",
        "--served-max-model-len",
        "4096",
    )

    assert done.returncode == 2
    assert "could not write to stdout (No space left on device)" in done.stderr
    assert "Traceback" not in done.stderr


def test_verify_into_a_closed_pipe_keeps_its_exit_code(tmp_path):
    done = shell('"$@" | head -c 0', "verify", str(tmp_path))

    assert "Traceback" not in done.stderr
    assert "BrokenPipeError" not in done.stderr


# -- what can be checked before the eval is checked before the eval -------------------------------


def test_a_missing_baseline_is_refused_before_the_eval(engine, tmp_path, cli):
    out = tmp_path / "run"
    with deadline(60, engine):
        code, _, err = cli(*run_args(engine.url, out, baseline=tmp_path / "nowhere", **HOSTILE_RUN))

    assert code == 2
    assert f"{tmp_path / 'nowhere'} is neither a run folder holding result.json" in err
    assert engine.total == 0  # no probe, no eval
    assert load_result(out)["status"] == "error"


@pytest.mark.parametrize(
    ("baseline_flags", "says"),
    [
        (["--api", "completions"], 'api: baseline "completions", this run "chat"'),
        (["--limit", "5"], "limit: baseline 5, this run 10"),
    ],
    ids=["another API", "another question count"],
)
def test_a_baseline_measured_differently_is_refused_before_the_eval(
    engine, tmp_path, cli, baseline_flags, says
):
    base = tmp_path / "base"
    with deadline(60, engine):
        assert cli(*run_args(engine.url, base, **HOSTILE_RUN), *baseline_flags)[0] == 0
    engine.clear()
    out = tmp_path / "run"

    with deadline(60, engine):
        code, _, err = cli(*run_args(engine.url, out, baseline=base, **HOSTILE_RUN))

    assert code == 2, err
    assert "was not measured the same way as this run" in err and says in err
    assert engine.total == 0
    assert load_result(out)["eval"] is None


# -- the disk: full, read-only, a folder where a file should be ------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Any]:
    """A folder on its own tmpfs of `size` bytes (needs root and mount; else the test skips)."""
    mounted: list[Path] = []

    def make(size: int) -> Path:
        point = tmp_path / f"disk-{size}"
        point.mkdir()
        if not mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(point)):
            pytest.skip("a small tmpfs needs root and mount(8)")
        mounted.append(point)
        return point

    yield make
    for point in mounted:
        umount(point)


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """An existing folder nobody can write: a read-only bind mount as root, else mode 0555."""
    folder = tmp_path / "ro"
    folder.mkdir()
    if os.geteuid() == 0:
        if not (
            mount("--bind", str(folder), str(folder))
            and mount("-o", "remount,bind,ro", str(folder))
        ):
            pytest.skip("a read-only bind mount needs mount(8)")
        yield folder
        umount(folder)
    else:
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)


@pytest.mark.parametrize("size", [4, 12, 24, 40, 48], ids=lambda n: f"{n} KiB")
def test_a_full_disk_is_an_error_that_says_what_to_do_never_a_pass(engine, small_disk, cli, size):
    """The disk fills up at whichever write: the first result, the journal, the samples, the
    raw results or the final result. Never a pass, never "please report it"; a result.json that
    is left says what the exit code says."""
    out = small_disk(size * 1024) / "run"
    engine.behaviour.reply_tokens = 400  # long answers: the journal and samples fill the disk
    with deadline(60, engine):
        code, stdout, err = cli(*run_args(engine.url, out, **HOSTILE_RUN))

    assert code == 4, err
    assert "please report it" not in err and "Traceback" not in err
    assert "No space left on device" in err
    assert "free space or choose another --output-dir" in err
    assert "PASS" not in stdout
    if (out / "result.json").exists():
        doc = load_result(out)
        assert doc["status"] in ("running", "error")
        assert doc["exit_code"] == code
    journal = out / "journal.jsonl"
    assert not journal.exists() or journal.stat().st_size > 0


def test_a_read_only_output_folder_is_refused_before_anything_runs(engine, read_only_dir, cli):
    with deadline(60, engine):
        code, _, err = cli(*run_args(engine.url, read_only_dir, **HOSTILE_RUN))

    assert code == 2
    assert f"ArtifactError: The output folder {read_only_dir} is not writable" in err
    assert "choose a writable --output-dir" in err
    assert "please report it" not in err
    assert engine.log == []


def test_an_output_folder_under_a_read_only_folder_is_refused(engine, read_only_dir, cli):
    with deadline(60, engine):
        code, _, err = cli(*run_args(engine.url, read_only_dir / "run", **HOSTILE_RUN))

    assert code == 2
    assert f"ArtifactError: Cannot create the output folder {read_only_dir / 'run'}" in err
    assert engine.log == []


@pytest.mark.parametrize("overwrite", [False, True], ids=["", "--overwrite"])
def test_a_result_json_that_is_a_folder_is_refused(engine, tmp_path, cli, overwrite):
    out = tmp_path / "run"
    (out / "result.json").mkdir(parents=True)
    (out / "result.json" / "keep.txt").write_text("mine\n")
    extra = ["--overwrite"] if overwrite else []
    with deadline(60, engine):
        code, _, err = cli(*run_args(engine.url, out, *extra, **HOSTILE_RUN))

    assert code == 2
    assert f"ArtifactError: {out / 'result.json'} is a folder, not a result" in err
    assert "please report it" not in err
    assert (out / "result.json" / "keep.txt").read_text() == "mine\n"
    assert engine.log == []


def test_every_evidence_file_gets_the_same_mode_as_any_file_the_user_creates(engine, tmp_path):
    """A collector running as another user reads them all, or none (the umask decides)."""
    out = tmp_path / "run"
    old = os.umask(0o022)
    try:
        with deadline(60, engine):
            from evalgate.run import run_gate

            given = {"osl": 1024, "limit": HOSTILE_LIMIT, "min_samples": 0}
            defaults = {"num_concurrent": None, "ready_timeout": None}  # the library's own
            outcome = run_gate(run_settings(engine.url, out, **given, **defaults))
    finally:
        os.umask(old)

    assert outcome.exit_code == 0
    modes = {f.name: oct(f.stat().st_mode & 0o777) for f in out.iterdir()}
    assert set(modes) >= {"result.json", "samples.jsonl", "journal.jsonl", "lm_eval_results.json"}
    assert set(modes.values()) == {oct(0o644)}, modes


def test_a_run_outside_a_git_checkout_prints_no_git_error(engine, tmp_path):
    work = tmp_path / "not-a-checkout"
    work.mkdir()
    env = {"GIT_CEILING_DIRECTORIES": str(tmp_path)}
    with deadline(90, engine):
        child = start_subprocess(
            *run_args(engine.url, work / "run", **HOSTILE_RUN), cwd=work, env=env
        )
        stdout, stderr = child.communicate(timeout=80)

    assert child.returncode == 0, stderr
    assert "not a git repository" not in stderr
    assert "fatal:" not in stderr
    assert stdout.startswith("PASS: ")


# -- no input makes evalgate hang -----------------------------------------------------------------


def test_verify_of_a_fifo_named_result_json_does_not_hang(tmp_path):
    os.mkfifo(tmp_path / "result.json")
    done = run_subprocess("verify", str(tmp_path), "--no-github", timeout=60)

    assert done.returncode == 1, done.stderr
    assert "is not a regular file (a FIFO, a device or a socket)" in done.stdout


def test_a_run_into_a_folder_with_a_fifo_result_does_not_hang(engine, tmp_path):
    os.mkfifo(tmp_path / "result.json")
    with deadline(60, engine):
        done = run_subprocess(
            *run_args(engine.url, tmp_path, "--overwrite", **HOSTILE_RUN), timeout=50
        )

    assert done.returncode == 2, done.stderr
    assert "is not a regular file (a FIFO, a device or a socket)" in done.stderr
    assert engine.log == []


@pytest.mark.parametrize("given", ["the folder", "its result.json"])
def test_a_baseline_that_is_the_output_folder_is_never_written_over(engine, tmp_path, cli, given):
    base = tmp_path / "base"
    with deadline(60, engine):
        assert cli(*run_args(engine.url, base, **HOSTILE_RUN))[0] == 0
    before = {f.name: f.read_bytes() for f in base.iterdir()}
    engine.clear()
    baseline = base if given == "the folder" else base / "result.json"

    with deadline(60, engine):
        code, _, err = cli(
            *run_args(engine.url, base, "--overwrite", baseline=baseline, **HOSTILE_RUN)
        )

    assert code == 2
    assert "the run would write over the run it compares with" in err
    assert {f.name: f.read_bytes() for f in base.iterdir()} == before
    assert engine.log == []
