"""A run's folder as the tests drive it: a short run, a run held mid-eval (its lock taken), and
what a refusal must leave as it was.

A refused command changes nothing (RELIABILITY.md, "A refusal changes nothing"): every file that
was in the folder before is byte for byte the same after it; only the lock file may differ.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

from evalgate.evidence.folder import LOCK_NAME
from tests.conftest import finish, run_subprocess, start_subprocess
from tests.fakeengine import NOT_PROBE, FakeEngine, Fault

SHORT = ("--limit", "5", "--min-samples", "0")
"""A run of five questions, decided on its point estimate."""


def checksums(folder: Path) -> dict[str, str]:
    """The sha256 of every file under `folder` (the lock file aside), by relative path."""
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.name != LOCK_NAME
    }


RERUN_HOOK = {"command": "hook", "concurrency": "4 8", "limit": 20, "min_samples": 0}
"""`evalgate hook` in evalgate's layout: conc 4 and 8, 20 questions each."""


RERUN_RUN = {"limit": 10, "min_samples": 0}
"""`evalgate run`: 10 questions."""


def verify_code(folder: Path) -> tuple[int, str]:
    """`evalgate verify` of `folder` in its own process: its exit code and stdout."""
    done = run_subprocess("verify", str(folder), "--min-samples", "0", "--no-github")
    return done.returncode, done.stdout


# -- hostile environments: signals, closed and full streams, full and read-only disks -----------

SMALL_LIMIT = 10


SMALL_RUN = {
    "osl": 1024, "limit": SMALL_LIMIT, "num_concurrent": 2, "timeout": 60, "max_attempts": 2,
    "min_samples": 0,  # folders and environments, not statistics: the point estimate decides
}  # fmt: skip
"""A short run: 10 questions, 2 in flight, a minute for each answer."""


def mount(*args: str) -> bool:
    """mount(8) with `args`, as root: whether it mounted (False where it cannot)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    done = subprocess.run(["mount", *args], capture_output=True, check=False)  # noqa: S607
    return done.returncode == 0


def umount(path: Path) -> None:
    """Unmount `path`, lazily."""
    subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)  # noqa: S607


def hang_after_two() -> Fault:
    """Two answers, then every request hangs: a run held mid-eval, its lock taken."""
    return Fault("hang", nth=NOT_PROBE - {2, 3})


@contextlib.contextmanager
def mid_eval(engine: FakeEngine, *args: str) -> Iterator[subprocess.Popen[str]]:
    """`evalgate ARGS` held mid-eval (two answers in, every further request hanging), so its
    folder is locked; stopped at the end, if still running, by SIGTERM as a scheduler stops a
    job (it then records itself as aborted, exit 6). The engine answers again afterwards."""
    engine.inject(hang_after_two())
    child = start_subprocess(*args)
    try:
        assert engine.wait_until(lambda e: e.hanging >= 2, timeout=120)
        yield child
    finally:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
        finish(child, 60)
        engine.behaviour.faults.clear()
        engine.release()
