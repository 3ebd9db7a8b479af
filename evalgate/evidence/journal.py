"""The eval's journal: every answer appended as it arrives, so a Ctrl-C or SIGTERM loses nothing
done and ``--resume`` sends only the requests not yet answered, under the same fingerprint. A
line (JournalLine) keeps the names journals have always been written with, so an earlier one
still resumes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from pathlib import Path
from typing import IO, Any

import msgspec
from msgspec import structs

from evalgate import scrub
from evalgate.errors import ArtifactError
from evalgate.evidence.folder import open_in_place
from evalgate.evidence.model import AnswerField, Count, Integer, Limit, Protocol, Reply, to_document
from evalgate.reader import decode

log = logging.getLogger(__name__)
_OWN = scrub.OWN_FIELDS | {"key"}
"""Not scrubbed: evalgate's own fields, and the answer's key (a hash)."""


class JournalLine(msgspec.Struct, frozen=True):
    """An answer received (a failed request is not journaled): Reply's fields, in the order and
    under the names journals have always been written with; a field an earlier journal did not
    write is None."""

    prompt_sha256: str = msgspec.field(name="key")
    doc_id: Count
    response: str = msgspec.field(name="text")
    finish_reason: str | None = None
    completion_tokens: Integer | None = None
    answer_field: AnswerField | None = msgspec.field(default=None, name="source")
    reasoning: str | None = None
    reasoning_tokens: Count | None = None


def body_key(body: dict[str, Any]) -> str:
    """The sha256 of a request body: its answer's key in the journal."""
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def fingerprint(
    protocol: Protocol,
    *,
    model: str | None,
    engine_version: str | None,
    served: list[Limit] | None,
    questions: int,
) -> dict[str, Any]:
    """What must match for a journal's answers to be reused (--resume): the engine, and the
    protocol fields the request bodies (which key the answers) do not already hold."""
    return {
        "model": model,
        "engine_version": engine_version,
        "served": msgspec.to_builtins(served),
        "api": protocol.api,
        "task_sha256": protocol.task_sha256,
        "dataset_sha256": protocol.dataset.sha256,
        "max_tokens": protocol.max_tokens,
        "questions": questions,
    }


def _reply(record: Any) -> Reply | None:
    """A journal line's answer; None for a line that holds none (a stray or broken one)."""
    try:
        line = msgspec.convert(record, JournalLine)
    except msgspec.ValidationError:
        return None
    return Reply(**structs.asdict(line), error=None)


def read_journal(path: Path, fingerprint: dict[str, Any]) -> dict[str, Reply]:
    """Answers recorded under the same fingerprint, by body key ({} if none or different)."""
    if not path.is_file():
        return {}
    answers: dict[str, Reply] = {}
    with path.open(encoding="utf-8", errors="replace") as handle:
        header = handle.readline()
        try:
            recorded = decode(header).get("fingerprint")
        except (ArtifactError, AttributeError):
            recorded = None
        if recorded != scrub.values(fingerprint, _OWN):  # as it was written
            log.warning("journal %s is from another engine or protocol: not reused", path)
            return {}
        for line in handle:
            try:
                reply = _reply(decode(line))
            except ArtifactError:
                break  # a line cut by a crash (or not JSON at all) ends the usable journal
            if reply is not None:
                answers[reply.prompt_sha256] = reply
    return answers


class Journal:
    """Append-only writer; each record is flushed before the next request is counted done.
    Opened never through a link (evidence.folder.open_in_place)."""

    def __init__(self, path: Path, fingerprint: dict[str, Any], kept: dict[str, Reply]) -> None:
        self.path = path
        fd = open_in_place(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        self._handle: IO[str] = os.fdopen(fd, "w", encoding="utf-8")
        try:
            self._write({"fingerprint": fingerprint})
        except OSError:
            self.close()
            path.unlink(missing_ok=True)  # a journal without its header is no journal
            raise
        for reply in kept.values():
            self.append(reply)

    def _write(self, record: dict[str, Any]) -> None:
        try:
            self._handle.write(scrub.json_text(record, own=_OWN) + "\n")  # minus secrets
            self._handle.flush()
        except OSError as exc:
            if exc.filename is None:
                exc.filename = str(self.path)
            raise

    def append(self, reply: Reply) -> None:
        self._write(to_document(msgspec.convert(reply, JournalLine, from_attributes=True)))

    def close(self) -> None:
        with contextlib.suppress(OSError):  # the write that failed was reported already
            self._handle.close()
