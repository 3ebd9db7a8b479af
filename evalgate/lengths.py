"""Lengths in tokens: a limit with where it came from, and vLLM's shorthand for lengths."""

from __future__ import annotations

from typing import Annotated

import msgspec

SUFFIXES = {"": 1, "k": 1000, "K": 1024, "m": 1000**2, "M": 1024**2}
"""vLLM reads "32k" as 32000 and "32K" as 32768 (human_readable_int)."""


class Limit(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A length in tokens and where it came from (result.json records them as found)."""

    value: Annotated[int, msgspec.Meta(ge=0)]
    source: str
