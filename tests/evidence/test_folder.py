"""The output folder, end to end: one run at a time, no writes through links, never ''.

Black-box: `evalgate` runs as its own process (two at once where the point is two processes)
or through its CLI entry point, against the fake engine on 127.0.0.1, and each test checks what
a user sees: the exit code, the key sentence of the message, and the files on disk.
RELIABILITY.md lists each case with its test.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalgate.evidence.folder import LOCK_NAME
from tests.conftest import (
    FAULT_RUN,
    deadline,
    finish,
    load_result,
    run_args,
    run_subprocess,
    start_subprocess,
)
from tests.fakeengine import EngineBehaviour, FakeEngine
from tests.folders import (
    RERUN_HOOK,
    RERUN_RUN,
    SHORT,
    SMALL_RUN,
    checksums,
    mid_eval,
    mount,
    umount,
    verify_code,
)

pytestmark = pytest.mark.loopback


LOCK = ".evalgate.lock"


HOOK = {"command": "hook", "concurrency": 2, **SMALL_RUN}


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under `folder`, by its path inside it."""
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def test_a_second_run_into_a_folder_in_use_exits_2_naming_the_folder_and_its_holder(
    engine, tmp_path
):
    """Whatever it is told (--overwrite, --resume), a second process refuses a folder a live run
    holds: before it asks the engine anything, and without touching the first run's files."""
    out = tmp_path / "run"
    with deadline(240, engine), mid_eval(engine, *run_args(engine.url, out, **SMALL_RUN)) as first:
        files, asked = snapshot(out), len(engine.log)
        for extra in ([], ["--overwrite"], ["--resume"]):
            code, _, err = finish(start_subprocess(*run_args(engine.url, out, *extra, **SMALL_RUN)))

            assert code == 2, err
            assert f"{out} is in use by another evalgate run (process {first.pid})" in err
            assert "choose another --output-dir" in err
            assert len(engine.log) == asked  # not one request from the second run
            assert snapshot(out) == files
        assert (out / LOCK).read_text().strip() == str(first.pid)

    assert first.returncode == 6  # the first run went on undisturbed to its own end
    assert load_result(out)["status"] == "aborted"


def test_a_lock_left_by_a_killed_run_does_not_block_the_next(engine, tmp_path):
    out = tmp_path / "run"
    with deadline(240, engine):
        with mid_eval(engine, *run_args(engine.url, out, **SMALL_RUN)) as first:
            first.kill()  # SIGKILL: nothing of the run's own ends its lock
            first.wait(30)
        assert (out / LOCK).is_file()
        assert (out / LOCK).read_text().strip() == str(first.pid)

        code, _, err = finish(
            start_subprocess(*run_args(engine.url, out, "--resume", **SMALL_RUN)), 120
        )

    assert code == 0, err
    doc = load_result(out)
    assert doc["status"] == "pass"
    assert doc["eval"]["requests"]["resumed"] == 2, err


def test_a_hook_holds_its_staging_folder_and_each_run_folder(engine, tmp_path):
    """A second hook into the same staging folder, and a run into the folder of the concurrency
    the hook is running, are refused; the hook's files stay as they were."""
    stage = tmp_path / "stage"
    with deadline(240, engine), mid_eval(engine, *run_args(engine.url, stage, **HOOK)) as first:
        files, asked = snapshot(stage), len(engine.log)

        code, _, err = finish(start_subprocess(*run_args(engine.url, stage, **HOOK)))
        assert code == 2, err
        assert f"{stage} is in use by another evalgate run (process {first.pid})" in err

        code, _, err = finish(
            start_subprocess(*run_args(engine.url, stage / "conc-2", "--overwrite", **SMALL_RUN))
        )
        assert code == 2, err
        in_use = f"{stage / 'conc-2'} is in use by another evalgate run (process {first.pid})"
        assert in_use in err
        assert len(engine.log) == asked
        assert snapshot(stage) == files

    assert first.returncode == 6
    assert json.loads((stage / "hook.json").read_text())["runs"][0]["status"] == "aborted"


@pytest.mark.parametrize(
    "code", [errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS], ids=["ENOLCK", "EOPNOTSUPP", "ENOSYS"]
)
def test_a_file_system_without_locks_runs_unlocked_and_says_so(
    engine, tmp_path, cli, monkeypatch, code
):
    """NFS without its lock service (ENOLCK), a file system that has no locks (EOPNOTSUPP),
    Lustre mounted without -o flock (ENOSYS): faked for the lock file alone (no such mount can
    be made here; the libraries' own lock files stay as they are)."""
    flock = fcntl.flock

    def no_locks(fd: int, operation: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").endswith(f"/{LOCK}"):
            raise OSError(code, os.strerror(code))
        flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", no_locks)
    out = tmp_path / "run"
    with deadline(120, engine):
        done = cli(*run_args(engine.url, out, **SMALL_RUN))

    says = f"{out} cannot be locked ({os.strerror(code)}): nothing stops a second run"
    assert done.code == 0, done.err
    assert f"warning: {says}" in done.err
    assert any(says in w for w in load_result(out)["warnings"])


@pytest.mark.parametrize(
    "case",
    [
        ("journal.jsonl", False, []),
        ("journal.jsonl", False, ["--resume"]),
        ("journal.jsonl", True, []),
        (LOCK, False, []),
    ],
    ids=["journal", "journal, --resume", "journal, to nowhere", "the lock"],
)
def test_a_file_evalgate_writes_in_place_as_a_link_is_refused(engine, tmp_path, cli, case):
    name, dangling, extra = case
    out = tmp_path / "run"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    if not dangling:
        victim.write_text("precious\n")
    (out / name).symlink_to(victim)

    with deadline(120, engine):
        done = cli(*run_args(engine.url, out, *extra, **SMALL_RUN))

    assert done.code == 2, done.err
    assert f"{out / name} is a symbolic link" in done.err
    assert "Remove it" in done.err
    assert (victim.read_text() == "precious\n") if not dangling else not victim.exists()
    assert engine.log == []


@pytest.mark.parametrize(
    ("layout", "link"),
    [("evalgate", "conc-2"), ("harness", "evalgate")],
    ids=["conc-2", "evalgate"],
)
def test_a_hook_run_folder_that_is_a_link_is_refused(engine, tmp_path, layout, link):
    """The folders a hook names inside its staging folder: a link there would take a whole
    run's evidence wherever it points."""
    stage = tmp_path / "stage"
    stage.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (stage / link).symlink_to(elsewhere, target_is_directory=True)

    with deadline(120, engine):
        code, _, err = finish(
            start_subprocess(*run_args(engine.url, stage, **HOOK), "--layout", layout), 110
        )

    assert code == 2, err
    assert f"{stage / link} is a symbolic link: evalgate would write into what it points to" in err
    assert list(elsewhere.iterdir()) == []
    assert engine.log == []


def test_files_written_by_rename_replace_a_link_and_leave_its_target(engine, tmp_path, cli):
    """result.json, samples.jsonl and lm-eval's raw results are renamed into place: a link
    there is replaced by the file, and what it pointed to is never written."""
    out = tmp_path / "run"
    out.mkdir()
    victims = {}
    for name in ("result.json", "samples.jsonl", "lm_eval_results.json"):
        victims[name] = tmp_path / f"victim-{name}"
        victims[name].write_text(f"precious {name}\n")
        (out / name).symlink_to(victims[name])

    with deadline(120, engine):
        done = cli(*run_args(engine.url, out, "--overwrite", **SMALL_RUN))

    assert done.code == 0, done.err
    for name, victim in victims.items():
        assert victim.read_text() == f"precious {name}\n"
        assert (out / name).is_file() and not (out / name).is_symlink()
    assert load_result(out)["status"] == "pass"


@pytest.mark.parametrize(
    ("command", "how"),
    [("run", "flag"), ("run", "environment"), ("hook", "flag")],
    ids=["run --output-dir ''", "run EVALGATE_OUTPUT_DIR=''", "hook --output-dir ''"],
)
def test_an_empty_output_dir_is_refused_not_taken_as_the_working_directory(
    engine, tmp_path, command, how
):
    work = tmp_path / "work"
    work.mkdir()
    args = run_args(engine.url, command=command, **SMALL_RUN)
    if how == "flag":
        args += ["--output-dir", ""]
    env = {"EVALGATE_OUTPUT_DIR": ""} if how == "environment" else {}

    with deadline(120, engine):
        code, _, err = finish(start_subprocess(*args, env=env, cwd=work), 110)

    assert code == 2, err
    assert "--output-dir = '' (set by --output-dir or EVALGATE_OUTPUT_DIR)" in err
    assert "an empty folder name would write the evidence into the working directory" in err
    assert "pass a folder (the default is evalgate-results), or . for the working directory" in err
    assert list(work.iterdir()) == []
    assert engine.log == []


def test_a_lock_file_that_is_a_folder_is_refused_naming_it(tmp_path):
    """On 8c36240: exit 4, "please report", no result. A folder where the lock file goes is a
    usage error (exit 2) before anything is sent; the folder is left as it was."""
    out = tmp_path / "run"
    (out / LOCK_NAME).mkdir(parents=True)
    with FakeEngine(EngineBehaviour()) as engine:
        code, _, err = finish(start_subprocess(*run_args(engine.url, out, **SMALL_RUN)), 120)
        sent = list(engine.log)

    assert code == 2, err
    assert f"ArtifactError: {out / LOCK_NAME} is a folder, where evalgate keeps a file." in err
    assert "please report" not in err
    assert sent == []
    assert sorted(p.name for p in out.iterdir()) == [LOCK_NAME]


# A refusal changes nothing (RELIABILITY.md): every file in the folder before a refused command
# is byte for byte the same after it; only the lock file may be created or hold the refusing
# process's id.


RERUNS = [
    # (command, its options, what a rerun says, what a rerun with --resume says, files kept)
    (
        "run",
        RERUN_RUN,
        ["already holds a result (status pass)"],
        ["already holds a result (status pass)"],
        {"result.json", "samples.jsonl", "journal.jsonl"},
    ),
    (
        "hook",
        RERUN_HOOK,
        ["conc-4/result.json already holds a result (status pass)"],
        ["every concurrency staged in", "has finished (4: pass, 8: pass): nothing to continue"],
        {"hook.json", "conc-4/result.json", "conc-8/meta_env.json"},
    ),
]


@pytest.mark.parametrize("case", [r[1:] for r in RERUNS], ids=[r[0] for r in RERUNS])
def test_a_refused_rerun_leaves_every_file_and_the_verdict_as_they_were(engine, tmp_path, case):
    options, again_says, resumed_says, kept = case
    out = tmp_path / "out"
    first = run_subprocess(*run_args(engine.url, out, **options))
    assert first.returncode == 0, first.stderr
    before = checksums(out)
    verdict = verify_code(out)
    asked = len(engine.requests)
    again = run_subprocess(*run_args(engine.url, out, **options))
    resumed = run_subprocess(*run_args(engine.url, out, "--resume", **options))
    assert len(engine.requests) == asked  # the engine never asked
    assert checksums(out) == before
    for refused, says in ((again, again_says), (resumed, resumed_says)):
        assert refused.returncode == 2, refused.stderr
        assert all(said in refused.stderr for said in says), refused.stderr
    assert kept <= set(before)
    assert verify_code(out) == verdict and verdict[0] == 0


# The habits a user brings, each as its own process: a named folder still refuses an earlier
# result.


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


# Hostile environments, end to end: signals, closed and full streams, full and read-only disks.


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


def test_a_read_only_output_folder_is_refused_before_anything_runs(engine, read_only_dir, cli):
    with deadline(60, engine):
        code, _, err = cli(*run_args(engine.url, read_only_dir, **SMALL_RUN))

    assert code == 2
    assert f"ArtifactError: The output folder {read_only_dir} is not writable" in err
    assert "choose a writable --output-dir" in err
    assert "please report it" not in err
    assert engine.log == []


def test_an_output_folder_under_a_read_only_folder_is_refused(engine, read_only_dir, cli):
    with deadline(60, engine):
        code, _, err = cli(*run_args(engine.url, read_only_dir / "run", **SMALL_RUN))

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
        code, _, err = cli(*run_args(engine.url, out, *extra, **SMALL_RUN))

    assert code == 2
    assert f"ArtifactError: {out / 'result.json'} is a folder, not a result" in err
    assert "please report it" not in err
    assert (out / "result.json" / "keep.txt").read_text() == "mine\n"
    assert engine.log == []


def test_a_run_into_a_folder_with_a_fifo_result_does_not_hang(engine, tmp_path):
    os.mkfifo(tmp_path / "result.json")
    with deadline(60, engine):
        done = run_subprocess(
            *run_args(engine.url, tmp_path, "--overwrite", **SMALL_RUN), timeout=50
        )

    assert done.returncode == 2, done.stderr
    assert "is not a regular file (a FIFO, a device or a socket)" in done.stderr
    assert engine.log == []


# An output folder that cannot be created: a usage error before the engine is asked.


@pytest.mark.usefixtures("nineteen_of_twenty")
def test_an_output_folder_that_cannot_be_created_is_a_usage_error(engine, tmp_path, cli):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder", encoding="utf-8")

    code, _, err = cli(*run_args(engine.url, blocker / "run", **FAULT_RUN), within=30)

    assert code == 2
    assert f"ArtifactError: Cannot create the output folder {blocker / 'run'}: " in err
    assert engine.log == []
