"""A run's folder as the tests drive it: a short run, and what a refusal must leave as it was.

A refused command changes nothing (RELIABILITY.md, "A refusal changes nothing"): every file that
was in the folder before is byte for byte the same after it; only the lock file may differ.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from evalgate.evidence.folder import LOCK_NAME
from tests.conftest import (
    run_subprocess,
)

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

HOSTILE_LIMIT = 10


HOSTILE_RUN = {
    "osl": 1024, "limit": HOSTILE_LIMIT, "num_concurrent": 2, "timeout": 60, "max_attempts": 2,
    "min_samples": 0,  # the environment, not statistics: the point estimate decides
}  # fmt: skip


def mount(*args: str) -> bool:
    """mount(8) with `args`, as root: whether it mounted (False where it cannot)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    done = subprocess.run(["mount", *args], capture_output=True, check=False)  # noqa: S607
    return done.returncode == 0


def umount(path: Path) -> None:
    """Unmount `path`, lazily."""
    subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)  # noqa: S607
