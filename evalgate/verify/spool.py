"""What verify's second process found, on its way to the first (collect.py, a wide tree).

The child writes its part of the sweep to a spool file as length-prefixed msgpack frames, at
most _FRAME runs a frame; the parent reads them back once the child has ended. A run the child
judged travels without its decision, which is sent once for all the runs decided alike (they
share one reason and one tuple of checks: sweep.Rule), so the parent's copies share them too.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import IO, Any, NamedTuple

import msgspec

from evalgate.verify.records import CheckRow, Entry, Found, Note, Outcome

_FRAME = 2048
"""Runs a frame holds."""


class Part(NamedTuple):
    """Some of what one process found (collect.Collection's lists)."""

    found: list[Found]
    entries: list[Entry]
    malformed: list[Note]
    ignored: list[Note]


class _Decision(msgspec.Struct, array_like=True):
    """A verdict as the runs decided alike share it."""

    outcome: Outcome
    reason: str
    checks: tuple[CheckRow, ...]


class _Judged(msgspec.Struct, array_like=True):
    """A judged run: an Entry with its decision given by number."""

    key: str
    decision: int
    path: str | None
    source: str | None
    model: str | None
    labels: Mapping[str, Any] | None
    status: str | None
    stage: str | None


class _Frame(msgspec.Struct, array_like=True):
    found: list[Found] = msgspec.field(default_factory=list)
    decisions: list[_Decision] = msgspec.field(default_factory=list)
    """The decisions first made by this frame's judged runs (numbered on from the last)."""
    judged: list[_Judged] = msgspec.field(default_factory=list)
    malformed: list[Note] = msgspec.field(default_factory=list)
    ignored: list[Note] = msgspec.field(default_factory=list)


@functools.cache
def _frames() -> msgspec.msgpack.Decoder[_Frame]:
    return msgspec.msgpack.Decoder(_Frame)


def _judged_frames(entries: list[Entry]) -> Iterator[_Frame]:
    """Judged runs, _FRAME at a time, each decision sent once (the entries live meanwhile, so
    an id names one reason or one tuple of checks)."""
    numbers: dict[tuple[str, int, int], int] = {}
    for start in range(0, len(entries), _FRAME):
        frame = _Frame()
        for entry in entries[start : start + _FRAME]:
            alike = (entry.outcome, id(entry.reason), id(entry.checks))
            number = numbers.get(alike)
            if number is None:
                number = numbers[alike] = len(numbers)
                frame.decisions.append(_Decision(entry.outcome, entry.reason, entry.checks))
            frame.judged.append(
                _Judged(
                    entry.key,
                    number,
                    entry.path,
                    entry.source,
                    entry.model,
                    entry.labels,
                    entry.status,
                    entry.stage,
                )
            )
        yield frame


def write(file: IO[bytes], part: Part) -> None:
    """`part` into the spool file, frame by frame, flushed."""
    encode = msgspec.msgpack.Encoder().encode
    found = part.found
    frames = [_Frame(found=found[i : i + _FRAME]) for i in range(0, len(found), _FRAME)]
    frames += _judged_frames(part.entries)
    frames.append(_Frame(malformed=part.malformed, ignored=part.ignored))
    for frame in frames:
        data = encode(frame)
        file.write(len(data).to_bytes(8, "little") + data)
    file.flush()


def read(file: IO[bytes]) -> Iterator[Part]:
    """What a spool file holds, a frame at a time, from its start."""
    decisions: list[_Decision] = []
    file.seek(0)
    while header := file.read(8):
        frame = _frames().decode(file.read(int.from_bytes(header, "little")))
        decisions += frame.decisions
        entries = [
            Entry(
                run.key,
                (made := decisions[run.decision]).outcome,
                made.reason,
                run.path,
                run.source,
                run.model,
                run.labels,
                run.status,
                run.stage,
                made.checks,
            )
            for run in frame.judged
        ]
        yield Part(frame.found, entries, frame.malformed, frame.ignored)
