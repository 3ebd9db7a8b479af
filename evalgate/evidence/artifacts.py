"""Evidence on disk: result.json, samples.jsonl, lm-eval's raw results, written atomically.

Each file is written to a temporary file in the same folder, flushed to disk, then renamed over
the target: a reader (or a crash) sees the old file or the new one, never half of one.

The overwrite rule: a folder that already holds a finished result.json is not written into
unless the user says --overwrite (or --resume, for a run that did not finish). Two runs into
different folders share nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from evalgate.errors import ArtifactError
from evalgate.schemas import validation_errors

RESULT_NAME = "result.json"
SAMPLES_NAME = "samples.jsonl"
RAW_NAME = "lm_eval_results.json"


def write_atomic(path: Path, text: str) -> None:
    """Replace `path` with `text` in one step."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def write_json(path: Path, document: Any) -> None:
    """Atomic JSON file."""
    write_atomic(path, json.dumps(document, indent=2, ensure_ascii=False, default=str) + "\n")


def write_jsonl(path: Path, records: Iterable[dict[str, Any]]) -> None:
    """Atomic JSON-lines file."""
    write_atomic(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))


def read_result(path: Path) -> dict[str, Any]:
    """A result.json, checked against its schema."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ArtifactError(f"Cannot read {path}: {exc.strerror}.") from exc
    except UnicodeDecodeError as exc:
        raise ArtifactError(
            f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})."
        ) from exc
    except json.JSONDecodeError as exc:
        raise ArtifactError(f"{path} is not valid JSON (line {exc.lineno}: {exc.msg}).") from exc
    problems = validation_errors("result", document)
    if problems:
        raise ArtifactError(f"{path} is not a valid evalgate result: {'; '.join(problems[:5])}.")
    return dict(document)


def prepare_output_dir(folder: Path, *, overwrite: bool, resume: bool) -> None:
    """Create the folder; refuse to bury an earlier run's finished result."""
    existing = folder / RESULT_NAME
    if existing.exists() and not overwrite:
        status = "unreadable"
        with contextlib.suppress(OSError, ValueError, AttributeError):
            status = str(json.loads(existing.read_text(encoding="utf-8")).get("status"))
        if not (resume and status in ("aborted", "error", "running")):
            raise ArtifactError(
                f"{existing} already holds a result (status {status}). Choose another "
                "--output-dir, pass --overwrite to replace it"
                + (", or --resume to continue an interrupted run." if status != "pass" else ".")
            )
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ArtifactError(
            f"Cannot create the output folder {folder}: {exc.strerror}. Pass a writable "
            "--output-dir."
        ) from exc


STALE = (SAMPLES_NAME, RAW_NAME, "comparison.json")
"""Files a run rewrites; left from an earlier run in the same folder they would mislead."""


def clear_stale(folder: Path) -> None:
    """Remove an earlier run's per-run files (the journal stays: --resume reads it)."""
    for name in STALE:
        (folder / name).unlink(missing_ok=True)


def write_result(folder: Path, document: dict[str, Any]) -> Path:
    """Validate and write result.json. An invalid document is evalgate's bug: say so loudly."""
    problems = validation_errors("result", document)
    if problems:
        raise ArtifactError(
            "evalgate built a result that breaks its own schema (please report this): "
            + "; ".join(problems[:5])
        )
    path = folder / RESULT_NAME
    write_json(path, document)
    return path
