"""The output folder: one run at a time (an ``flock`` the kernel drops however the run ends), no
write through a link. The rules, and where the lock holds: RELIABILITY.md, "The output folder".
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
from datetime import datetime
from pathlib import Path

from evalgate.errors import ArtifactError
from evalgate.evidence.artifacts import (
    COMPARISON_NAME,
    JOURNAL_NAME,
    LOCK_NAME,
    RAW_NAME,
    RESULT_NAME,
    SAMPLES_NAME,
)
from evalgate.reader import read

STALE = (SAMPLES_NAME, RAW_NAME, COMPARISON_NAME)
"""Files a run rewrites; left from an earlier run in the same folder they would mislead."""
_NO_LOCKS = frozenset({errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS})
"""flock's answers on a file system without locks: NFS without lockd, FUSE, Lustre's noflock."""


def refuse_link(path: Path) -> None:
    """A file or folder evalgate names inside a folder it holds must not be a symbolic link:
    its writes would land wherever the link points (found before anything is sent)."""
    if path.is_symlink():
        raise ArtifactError(
            f"{path} is a symbolic link: evalgate would write into what it points to. Remove "
            "it, or choose another --output-dir."
        )


def _not_a_file(path: Path) -> ArtifactError:
    return ArtifactError(
        f"{path} is not a regular file (a FIFO, a device or a socket). Move it away, or choose "
        "another --output-dir."
    )


def open_in_place(path: Path, flags: int) -> int:
    """A descriptor for a file written in place: never through a symbolic link, and only a
    regular file (O_NONBLOCK: a FIFO must not block the open)."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            refuse_link(path)
        if exc.errno == errno.ENXIO:  # a FIFO nobody reads
            raise _not_a_file(path) from exc
        if exc.errno == errno.EISDIR:
            raise ArtifactError(
                f"{path} is a folder, where evalgate keeps a file. Remove it, or choose another "
                "--output-dir."
            ) from exc
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise _not_a_file(path)
    os.set_blocking(fd, True)
    return fd


class FolderLock(contextlib.AbstractContextManager["FolderLock"]):
    """One process's hold on a folder (see the module's docstring), created if need be; an
    ArtifactError (exit 2) when it cannot be created or written, or another run holds it.
    `warning` says when the file system could not lock it. Released by `release`, or when the
    process ends."""

    def __init__(self, folder: Path) -> None:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ArtifactError(
                f"Cannot create the output folder {folder}: {exc.strerror}. Pass a writable "
                "--output-dir."
            ) from exc
        if not os.access(folder, os.W_OK | os.X_OK):  # read-only mounts too, even for root
            raise ArtifactError(
                f"The output folder {folder} is not writable (read-only file system or no "
                "permission): choose a writable --output-dir."
            )
        self.folder = folder
        self.warning: str | None = None
        self._fd: int | None = open_in_place(folder / LOCK_NAME, os.O_RDWR | os.O_CREAT)
        try:
            self._take(self._fd)
        except BaseException:
            self.release()
            raise

    def _take(self, fd: int) -> None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ArtifactError(
                f"{self.folder} is in use by another evalgate run (process {_holder(fd)}): "
                f"wait for it to end, or choose another --output-dir. ({LOCK_NAME} there is its "
                "lock; one left by a run that was killed does not block.)"
            ) from None
        except OSError as exc:
            if exc.errno not in _NO_LOCKS:
                raise
            self.warning = (
                f"{self.folder} cannot be locked ({exc.strerror}): nothing stops a second run "
                "from writing into it at the same time. Give each run its own --output-dir, or "
                "use a file system with locks (NFS with its lock service, Lustre mounted with "
                "-o flock, a local disk)"
            )
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        os.fsync(fd)  # on NFS, to the server: a run refused on another node reads it there

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def __exit__(self, *exc: object) -> None:
        self.release()


def _holder(fd: int) -> str:
    """The process id the holder wrote, read through the descriptor already open (on NFS,
    closing a second one would drop this process's POSIX locks on the file)."""
    text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    return text if text.isdigit() else "unknown: it has not written its id yet"


def fresh(base: Path, now: datetime | None = None) -> Path:
    """A new folder under `base` for one run, made here so that no other run has it: named by
    the local time (run-20261205-030102, as lm-eval stamps its files), -2, -3, ... after it
    when a run started in the same second."""
    stamp = f"run-{(now or datetime.now()):%Y%m%d-%H%M%S}"
    try:
        base.mkdir(parents=True, exist_ok=True)
        for number in range(1, 1000):
            folder = base / (stamp if number == 1 else f"{stamp}-{number}")
            with contextlib.suppress(FileExistsError):
                folder.mkdir()
                return folder
    except OSError as exc:
        raise ArtifactError(
            f"Cannot create a folder for this run under {base}: {exc.strerror}. Pass a writable "
            "--output-dir."
        ) from exc
    raise ArtifactError(
        f"{base} already holds 999 runs started at {stamp}: pass --output-dir for this one."
    )


def prepare(folder: Path, *, overwrite: bool, resume: bool) -> FolderLock:
    """Hold the folder, then refuse to bury an earlier run's finished result or to append
    through a link."""
    lock = FolderLock(folder)
    try:
        _refuse(folder, overwrite=overwrite, resume=resume)
    except BaseException:
        lock.release()
        raise
    return lock


def _refuse(folder: Path, *, overwrite: bool, resume: bool) -> None:
    refuse_link(folder / JOURNAL_NAME)  # found now, not when the eval opens it
    existing = folder / RESULT_NAME
    if existing.is_dir():  # no --overwrite replaces a folder: it may hold anything
        raise ArtifactError(
            f"{existing} is a folder, not a result file. Move it away, or choose another "
            "--output-dir."
        )
    if existing.exists() and not existing.is_file():  # a FIFO would block the read forever
        raise _not_a_file(existing)
    if existing.exists() and not overwrite:
        status = "unreadable"
        with contextlib.suppress(ArtifactError, AttributeError):
            status = str(read(existing).get("status"))
        if not (resume and status in ("aborted", "error", "running")):
            raise ArtifactError(
                f"{existing} already holds a result (status {status}). Choose another "
                "--output-dir, pass --overwrite to replace it"
                + (", or --resume to continue an interrupted run." if status != "pass" else ".")
            )


def holder(folder: Path | str) -> str | None:
    """The process id in the folder's lock file while that lock is held (a run is alive in
    it; "unknown" if the file names none); None if it is not held, or cannot be tested. Only
    reads: the lock file is neither created nor written."""
    try:
        fd = os.open(os.path.join(folder, LOCK_NAME), os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released when fd is closed
        except BlockingIOError:
            pid = os.read(fd, 32).decode("ascii", "replace").strip()
            return pid if pid.isdigit() else "unknown"
        except OSError:  # a file system without flock: nothing to tell
            return None
        return None
    finally:
        os.close(fd)


def check_free(folder: Path, *, overwrite: bool, resume: bool) -> None:
    """What `prepare` would refuse in `folder`, found without taking it or writing a byte: a
    command that runs into several folders (the hook) checks them all before it writes any,
    so that a refusal changes nothing (RELIABILITY.md, "A refusal changes nothing")."""
    refuse_link(folder)
    refuse_link(folder / LOCK_NAME)
    if not folder.is_dir():
        return
    held = holder(folder)
    if held is not None:
        raise ArtifactError(
            f"{folder} is in use by another evalgate run (process {held}): wait for it to "
            "end, or choose another --output-dir."
        )
    _refuse(folder, overwrite=overwrite, resume=resume)


def clear_stale(folder: Path) -> None:
    """Remove an earlier run's per-run files (the journal stays: --resume reads it)."""
    for name in STALE:
        (folder / name).unlink(missing_ok=True)
