"""Evidence on disk: the one writer and the one reader of every file a run leaves.

Each file is written to a temporary file in the same folder, flushed to disk, then renamed over
the target: a reader (or a crash) sees the old file or the new one, never half of one. What is
written is checked against its schema first (a document that breaks it is evalgate's bug); what
is read is checked against its schema, then decoded into the typed model (evidence.model).

The folder itself (one run at a time, the overwrite rule, no write through a link) is
evidence.folder's.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import os
import stat
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar, overload

import msgspec

from evalgate.errors import ArtifactError, EvalFailedError
from evalgate.evidence.model import HookSummary, Result, Sample, from_document, to_document
from evalgate.schemas import accepts_json, validation_errors

RESULT_NAME = "result.json"
SAMPLES_NAME = "samples.jsonl"
RAW_NAME = "lm_eval_results.json"
JOURNAL_NAME = "journal.jsonl"
COMPARISON_NAME = "comparison.json"
HOOK_NAME = "hook.json"
META_NAME = "meta_env.json"
"""The benchmark harness's per-run metadata file (its collector reads it)."""

NOT_A_RESULT = "is not a valid evalgate result (result.schema.json)"


# -- writing -------------------------------------------------------------------------------------


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


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomic(path: Path, text: str) -> None:
    """Replace `path` with `text` in one step (an OSError names `path`)."""
    temp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.fchmod(handle, 0o666 & ~_umask())  # mkstemp's 0600 would hide evidence from collectors
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


def write_json(path: Path, document: Any) -> None:
    """Atomic JSON file."""
    write_atomic(path, json.dumps(document, indent=2, ensure_ascii=False, default=str) + "\n")


def write_jsonl(path: Path, records: Iterable[Any]) -> None:
    """Atomic JSON-lines file."""
    write_atomic(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))


def _checked(kind: str, document: Any) -> Any:
    problems = validation_errors(kind, document)
    if problems:
        raise ArtifactError(
            f"evalgate built a {kind} record that breaks its own schema (please report this): "
            + "; ".join(problems[:5])
        )
    return document


def write_result(folder: Path, result: Result) -> Path:
    """Validate and write result.json."""
    path = folder / RESULT_NAME
    write_json(path, _checked("result", to_document(result)))
    return path


def write_samples(folder: Path, samples: Sequence[Sample]) -> Path:
    """Validate and write samples.jsonl, one question a line, in doc_id order."""
    path = folder / SAMPLES_NAME
    write_jsonl(path, [_checked("sample", to_document(s)) for s in samples])
    return path


def write_hook(folder: Path, summary: HookSummary) -> Path:
    """Validate and write hook.json."""
    path = folder / HOOK_NAME
    write_json(path, _checked("hook", to_document(summary)))
    return path


# -- reading -------------------------------------------------------------------------------------


_decode = msgspec.json.Decoder().decode


def _read_bytes(path: Path | str) -> bytes:
    """A file's bytes: opened without blocking (a FIFO would block forever), then refused
    unless it is a regular file; four system calls, half the cost of open() and read()."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise ArtifactError(f"{path} is not a regular file (a FIFO, a device or a socket).")
            data = os.read(fd, info.st_size + 1)
            while len(data) > info.st_size:  # it grew since the fstat: read to its end
                more = os.read(fd, 1 << 20)
                if not more:
                    break
                data += more
            return data
        finally:
            os.close(fd)
    except OSError as exc:
        raise ArtifactError(f"Cannot read {path}: {exc.strerror}.") from exc


def _parse(data: bytes, path: Path | str) -> Any:
    try:
        return _decode(data)
    except msgspec.DecodeError:
        pass
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ArtifactError(
            f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})."
        ) from exc
    except json.JSONDecodeError as exc:
        raise ArtifactError(
            f"{path} is not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg})"
        ) from exc


def read_document(path: Path | str) -> Any:
    """A JSON file's content; an unreadable, non-UTF-8 or invalid file is an ArtifactError.

    msgspec decodes (in C, twice as fast as the json module); a file it refuses is decoded
    again by the json module, which accepts what it accepts (NaN, integers of any size) and
    says where the text breaks, so the answer and the message are the json module's.
    """
    return _parse(_read_bytes(path), path)


def result_from_document(document: Any, path: Path | str) -> Result:
    """A parsed result.json as the typed model, checked against result.schema.json."""
    problems = validation_errors("result", document)
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise ArtifactError(f"{path} {NOT_A_RESULT}: " + "; ".join(problems[:3]) + more)
    try:
        return from_document(document, Result)
    except msgspec.ValidationError as exc:  # the schema allowed what the model cannot hold
        raise ArtifactError(f"{path} {NOT_A_RESULT}: {exc}") from exc


_decode_sample = msgspec.json.Decoder(Sample).decode
ViewT = TypeVar("ViewT", bound=msgspec.Struct)


def _typed_sample(line: str) -> Sample | None:
    """A samples.jsonl line its schema's msgspec type accepted, decoded into the model (None:
    the model is stricter; the full way says why)."""
    try:
        return _decode_sample(line)
    except msgspec.ValidationError:
        return None


@functools.cache
def _result_decoder(view: type[msgspec.Struct]) -> Callable[[bytes], Any]:
    return msgspec.json.Decoder(view).decode


@overload
def read_result(path: Path | str) -> Result: ...
@overload
def read_result(path: Path | str, view: type[ViewT]) -> ViewT: ...
def read_result(path: Path | str, view: type[msgspec.Struct] = Result) -> Any:
    """result.json, checked against its schema and decoded: into the model, or into `view`, a
    Struct holding the part of it a reader needs, typed as the model types it (the rest of the
    text is then checked and skipped, not built).

    Text the schema's msgspec type accepts is decoded straight into the model, in C; any other
    text takes the full way (parse, check, convert), which says what is wrong with it."""
    data = _read_bytes(path)
    if accepts_json("result", data):
        with contextlib.suppress(msgspec.ValidationError):  # the model is stricter: say why below
            return _result_decoder(view)(data)
    document = _parse(data, path)
    result = result_from_document(document, path)
    return result if view is Result else msgspec.convert(document, view)


def read_samples(path: Path) -> list[Sample]:
    """samples.jsonl; a malformed line or a repeated doc_id is an ArtifactError."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ArtifactError(
            f"Cannot read {path}: {exc.strerror}. A comparison pairs the per-question records "
            f"of {SAMPLES_NAME}, which evalgate run writes beside {RESULT_NAME}."
        ) from exc
    except UnicodeDecodeError as exc:
        raise ArtifactError(f"{path} is not UTF-8 text ({exc.reason}).") from exc
    samples: list[Sample] = []
    seen: set[int] = set()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        sample = _typed_sample(line) if accepts_json("sample", line) else None
        if sample is None:  # the full way, which says what is wrong
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ArtifactError(f"{path} line {number} is not valid JSON ({exc.msg}).") from exc
            problems = validation_errors("sample", record)
            if problems:
                raise ArtifactError(
                    f"{path} line {number} is not a valid evalgate sample: "
                    f"{'; '.join(problems[:5])}."
                )
            sample = from_document(record, Sample)
        if sample.doc_id in seen:
            raise ArtifactError(f"{path} line {number} repeats doc_id {sample.doc_id}.")
        seen.add(sample.doc_id)
        samples.append(sample)
    return samples


def read_hook(path: Path | str) -> HookSummary:
    """hook.json, checked against its schema and decoded."""
    document = read_document(path)
    problems = validation_errors("hook", document)
    if problems:
        raise ArtifactError(f"{path} is not an evalgate hook summary: {'; '.join(problems[:3])}")
    return from_document(document, HookSummary)
