"""Lengths in tokens: a limit with where it came from, and vLLM's shorthand for lengths."""

from __future__ import annotations

import msgspec

from evalgate.evidence.fields import Count
from evalgate.numbers import SUFFIXES

__all__ = ["SUFFIXES", "Limit"]


class Limit(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A length in tokens and where it came from (result.json records them as found)."""

    value: Count
    source: str
