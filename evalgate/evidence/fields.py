"""The evidence contract's building blocks: the base record, bounded numbers and the names a
field may hold (evidence/model.py puts them together)."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta

INT64 = 2**63
"""Every integer of a typed document is below this in magnitude, as every count and length
evalgate writes is: msgspec refuses one past it as it decodes, naming its JSON path (arithmetic
on it would overflow wherever it went next). Plain values are evidence/read.py's to bound."""
Integer = Annotated[int, Meta(ge=-INT64, le=INT64 - 1)]
Count = Annotated[int, Meta(ge=0, le=INT64 - 1)]
Positive = Annotated[int, Meta(ge=1, le=INT64 - 1)]
Fraction = Annotated[float, Meta(ge=0, le=1)]
Delta = Annotated[float, Meta(ge=-1, le=1)]
"""A difference of two fractions (a candidate's score minus its baseline's)."""
Amount = Annotated[float, Meta(ge=0)]

Status = Literal["pass", "fail", "inconclusive", "error", "aborted", "running"]
Stage = Literal[
    "settings",
    "context",
    "dataset",
    "thresholds",
    "readiness",
    "probe",
    "eval",
    "gate",
    "artifacts",
    "done",
]
Api = Literal["chat", "completions"]
AnswerField = Literal["content", "reasoning_content", "reasoning", "text"]
HookStatus = Literal["pass", "fail", "inconclusive", "error", "aborted", "running", "not run"]


class Record(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """A part of the evidence: immutable once built, written with every key present."""
