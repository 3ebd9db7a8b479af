"""The evidence contract's building blocks: the base record, bounded numbers and the names a
field may hold (evidence/model.py puts them together)."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta

Count = Annotated[int, Meta(ge=0)]
Positive = Annotated[int, Meta(ge=1)]
Fraction = Annotated[float, Meta(ge=0, le=1)]
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
