"""The eval's journal: every answer appended as it arrives, so nothing done is lost.

``journal.jsonl`` in the output folder starts with a header line holding the run's fingerprint
(engine version, served limits, model, and the protocol: task file, data set, API, budget,
question count). Each further line is one answered request, keyed by the sha256 of its body.
A Ctrl-C or SIGTERM leaves every answer received so far on disk; a rerun with the same
fingerprint (``--resume``) sends only the requests not yet answered. A journal whose fingerprint
differs is never reused.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
from pathlib import Path
from typing import IO, Any

from evalgate import outside
from evalgate.errors import ArtifactError
from evalgate.evidence.read import decode

log = logging.getLogger(__name__)
JOURNAL_NAME = "journal.jsonl"


def body_key(body: dict[str, Any]) -> str:
    """A stable key for a request body."""
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def read_journal(path: Path, fingerprint: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Answers recorded under the same fingerprint, by body key ({} if none or different)."""
    if not path.is_file():
        return {}
    answers: dict[str, dict[str, Any]] = {}
    with path.open(encoding="utf-8", errors="replace") as handle:
        header = handle.readline()
        try:
            recorded = decode(header).get("fingerprint")
        except (ArtifactError, AttributeError):
            recorded = None
        if recorded != fingerprint:
            log.warning("journal %s is from another engine or protocol: not reused", path)
            return {}
        for line in handle:
            try:
                record = decode(line)
            except ArtifactError:
                break  # a line cut by a crash (or not JSON at all) ends the usable journal
            if isinstance(record, dict) and isinstance(record.get("key"), str):
                answers[record["key"]] = record
    return answers


class Journal:
    """Append-only writer; each record is flushed before the next request is counted done."""

    def __init__(
        self, path: Path, fingerprint: dict[str, Any], kept: dict[str, dict[str, Any]]
    ) -> None:
        self.path = path
        self._handle: IO[str] = path.open("w", encoding="utf-8")
        try:
            self._write({"fingerprint": fingerprint})
        except OSError:
            self.close()
            path.unlink(missing_ok=True)  # a journal without its header is no journal
            raise
        for record in kept.values():
            self._write(record)

    def _write(self, record: dict[str, Any]) -> None:
        try:
            self._handle.write(outside.json_text(record) + "\n")  # minus secrets
            self._handle.flush()
        except OSError as exc:
            if exc.filename is None:
                exc.filename = str(self.path)
            raise

    def append(self, record: dict[str, Any]) -> None:
        self._write(record)

    def close(self) -> None:
        with contextlib.suppress(OSError):  # the write that failed was reported already
            self._handle.close()
