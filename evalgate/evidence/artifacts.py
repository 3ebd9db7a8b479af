"""Evidence on disk: the one writer (atomic, each document read back first: RELIABILITY.md) and
the one reader of every file a run leaves (docs/architecture.md, "One evidence contract").
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import msgspec

from evalgate import scrub
from evalgate._version import EVAL_EXTRA
from evalgate.errors import ArtifactError, EvalFailedError
from evalgate.evidence.model import HookSummary, Result, Sample, to_document
from evalgate.reader import decode, decode_lines, read, read_bytes

RESULT_NAME = "result.json"
SAMPLES_NAME = "samples.jsonl"
RAW_NAME = "lm_eval_results.json"
JOURNAL_NAME = "journal.jsonl"
COMPARISON_NAME = "comparison.json"
HOOK_NAME = "hook.json"
META_NAME = "meta_env.json"
"""The benchmark harness's per-run metadata file (its collector reads it)."""
LOCK_NAME = ".evalgate.lock"
"""The output folder's lock (evidence.folder)."""
EVIDENCE_NAMES = frozenset(
    (
        RESULT_NAME,
        SAMPLES_NAME,
        JOURNAL_NAME,
        HOOK_NAME,
        META_NAME,
        RAW_NAME,
        COMPARISON_NAME,
        LOCK_NAME,
    )
)
"""The files a run folder (evalgate's or the benchmark harness's) holds as its evidence; with
the harness's results*.json and samples*.jsonl (evidence.outputs.is_evidence)."""

NOT_A_RESULT = "is not a valid evalgate result (result.schema.json)"

_WHAT_TO_DO = {
    errno.ENOSPC: "the disk is full: free space or choose another --output-dir",
    errno.EDQUOT: "the disk quota is used up: free space or choose another --output-dir",
    errno.EROFS: "the file system is read-only: choose a writable --output-dir",
    errno.EACCES: "permission denied: choose a writable --output-dir",
    errno.EPERM: "permission denied: choose a writable --output-dir",
    errno.EISDIR: "a folder is in the way: remove it or choose another --output-dir",
}


def cannot_write(path: Path | str, exc: OSError) -> EvalFailedError:
    """A write the disk refused (full, read-only, a folder in the way): an expected condition
    with what to do, never an evalgate bug. Exit 4: the run could not record its evidence."""
    path = exc.filename or path
    reason = exc.strerror or type(exc).__name__
    todo = _WHAT_TO_DO.get(exc.errno or 0, "check the disk, or choose another --output-dir")
    return EvalFailedError(f"Cannot write {path}: {reason}; {todo}, and run again.")


def os_failure(path: Path | str, exc: OSError) -> EvalFailedError:
    """An OSError that stopped a run: too many open files (while reading a module or opening a
    connection as likely as writing), else a write the disk refused (cannot_write)."""
    if exc.errno not in (errno.EMFILE, errno.ENFILE) and not _no_temp_dir_for_now(exc):
        return cannot_write(path, exc)
    import resource

    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    opening = f" opening {exc.filename}" if exc.filename else ""
    if exc.errno not in (errno.EMFILE, errno.ENFILE):
        exc = OSError(errno.EMFILE, f"Too many open files, by all signs (tempfile: {exc.strerror})")
    whose = "the system's" if exc.errno == errno.ENFILE else f"this process's ({soft}: ulimit -n)"
    return EvalFailedError(
        f"{exc.strerror}{opening}: the limit on open files, {whose}, is reached (a file being "
        "read or a connection, not the disk). Raise it (e.g. ulimit -n 4096) or lower "
        "--num-concurrent, and run again."
    )


def _no_temp_dir_for_now(exc: OSError) -> bool:
    """tempfile's "No usable temporary directory" hides why every folder refused a file (dill
    asks while lm-eval loads, as connections open): when a folder takes one now, it was the
    limit on open files, not the disk."""
    if not isinstance(exc, FileNotFoundError) or "No usable temporary directory" not in str(exc):
        return False
    try:
        with tempfile.TemporaryFile():
            return True
    except OSError as now:
        return now.errno in (errno.EMFILE, errno.ENFILE)


def refused_load(where: str, exc: ImportError | MemoryError) -> EvalFailedError:
    """A module that would not load, or memory refused: under a memory limit (ulimit -v, a job's
    cgroup) a shared library fails to map, which no evalgate bug explains. Its last line only
    (numpy's advice runs a page), the limit, and the two fixes."""
    import resource

    lines = [text.strip() for text in str(exc).splitlines() if text.strip()]
    said = scrub.capped(lines[-1], 300) if lines else "no message"
    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    limit = "unlimited" if soft == resource.RLIM_INFINITY else f"{soft // 1024} KiB"
    return EvalFailedError(
        f"{type(exc).__name__} {where}: {said}. Memory was refused (this process's limit, "
        f"ulimit -v: {limit}; or the machine's) or the install lacks a part: raise the limit, "
        f"or check the install (pip check; {EVAL_EXTRA}), and run again."
    )


def write_atomic(path: Path, text: str) -> None:
    """Replace `path` with `text` in one step (an OSError names `path`)."""
    temp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            mode = stat.S_IMODE(path.stat().st_mode)  # a file replaced keeps its mode
        except FileNotFoundError:  # mkstemp's 0600 would hide evidence from collectors
            umask = os.umask(0o022)  # the only way to read it is to set it
            os.umask(umask)
            mode = 0o666 & ~umask
        handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.fchmod(handle, mode)
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temp, path)
    except BaseException as exc:
        if temp is not None:
            Path(temp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.filename is None:
            exc.filename = str(path)  # fsync and write do not say which file: the target
        raise


def write_json(path: Path, document: Any) -> Path:
    """Atomic JSON file: the exact text minus the configured secrets (scrub.json_text)."""
    write_atomic(path, scrub.json_text(document, indent=2) + "\n")
    return path


def write_jsonl(path: Path, records: Iterable[Any]) -> Path:
    """Atomic JSON-lines file, as write_json writes each line."""
    write_atomic(path, "".join(scrub.json_text(r) + "\n" for r in records))
    return path


def _checked(kind: str, record: msgspec.Struct) -> Any:
    """The record as plain JSON values, read back as the reader reads it: what evalgate
    writes, it can read (a record that breaks the contract is evalgate's bug)."""
    document = to_document(record)
    try:
        decode(scrub.json_text(document), type(record), kind)  # the text as written
    except ArtifactError as exc:
        raise ArtifactError(
            f"evalgate built a {kind} record that breaks its own schema (please report this): "
            f"{exc.message}"
        ) from exc
    return document


def write_result(folder: Path, result: Result) -> Path:
    return write_json(folder / RESULT_NAME, _checked("result", result))


def write_samples(folder: Path, samples: Sequence[Sample]) -> Path:
    """samples.jsonl, one question a line, in doc_id order."""
    return write_jsonl(folder / SAMPLES_NAME, [_checked("sample", s) for s in samples])


def write_hook(folder: Path, summary: HookSummary) -> Path:
    return write_json(folder / HOOK_NAME, _checked("hook", summary))


def read_result(path: Path | str) -> Result:
    return read(path, Result, NOT_A_RESULT)


def read_samples(path: Path) -> list[Sample]:
    """samples.jsonl; a malformed line or a repeated doc_id is an ArtifactError."""
    try:
        data = read_bytes(path)
    except ArtifactError as exc:
        raise ArtifactError(
            f"{exc.message} A comparison pairs the per-question records of {SAMPLES_NAME}, "
            f"which evalgate run writes beside {RESULT_NAME}."
        ) from exc
    samples = decode_lines(data, Sample, str(path), "is not a valid evalgate sample")
    numbered = (n for n, line in enumerate(data.splitlines(), start=1) if line.strip())
    first: dict[int, int] = {}
    for number, sample in zip(numbered, samples, strict=True):
        if first.setdefault(sample.doc_id, number) != number:
            raise ArtifactError(f"{path} line {number} repeats doc_id {sample.doc_id}.")
    return samples


def read_hook(path: Path | str) -> HookSummary:
    return read(path, HookSummary, "is not an evalgate hook summary")
