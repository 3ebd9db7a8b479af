"""Numbers written by people (flags, variables, server arguments, --concurrency lists): one rule
for every one of them, and the ranges evalgate's settings hold (README.md, "Settings").

The rule: ASCII digits 0-9 only, with an optional sign, and for a fraction or seconds a decimal
point and an exponent (1.5, 2e-3); a length in tokens may end in vLLM's k, K, m or M. Python's
int() also reads other scripts' digits (١٦, ८), underscores (1_000), nan and inf, so an engine, a
shell or a harness that reads the same text as ASCII would read another number, or none.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable

SUFFIXES = {"": 1, "k": 1000, "K": 1024, "m": 1000**2, "M": 1024**2}
"""vLLM reads "32k" as 32000 and "32K" as 32768 (human_readable_int)."""
TOKENS_MAX = 2**31 - 1
"""The most tokens any length may be: engines hold lengths as 32-bit integers."""
COUNT_MAX = 2**31 - 1
"""The most of a count (questions, requests, attempts allowed to fail)."""
CONCURRENCY_MAX = 65_535
"""The most requests in flight: each holds a connection, and a host has 65,535 ports."""
ATTEMPTS_MAX = 1000
"""The most attempts at one request."""
SECONDS_MAX = 7 * 24 * 3600
"""The longest wait or deadline: a week."""
KEEPALIVE_SECONDS_MAX = 32_767
"""The kernel's largest TCP_KEEPIDLE and TCP_KEEPINTVL (Linux refuses more with EINVAL)."""
KEEPALIVE_PROBES_MAX = 127
"""The kernel's largest TCP_KEEPCNT."""
USER_TIMEOUT_MS_MAX = 2**31 - 1
"""The kernel's largest TCP_USER_TIMEOUT, in milliseconds."""
RESPONSE_BYTES_MAX = 1 << 30
"""The largest answer evalgate holds in memory (1 GiB)."""

_DIGITS_MAX = 40
"""Characters of a number read at all: more than any range here needs (int() of thousands of
digits is slow, and refused past 4,300)."""
_WHOLE = re.compile(r"[+-]?[0-9]+")
_REAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
TOKENS = re.compile(r"([+-]?[0-9]+)([kKmM]?)")
"""A length in tokens as vLLM reads server arguments (human_readable_int): 8192, 8k, 8K."""


def _text(text: str, kind: str, example: str) -> str:
    value = text.strip(" \t\n\r\v\f")  # str.strip() also drops U+00A0, which a shell keeps
    if len(value) > _DIGITS_MAX:
        raise ValueError(
            f"a number of {len(value):,} characters is not {kind}; write e.g. {example}"
        )
    if not value.isascii():
        raise ValueError(
            f"{kind} is written with the ASCII digits 0-9 only (no other script's digits); "
            f"write e.g. {example}"
        )
    return value


def whole(text: str) -> int:
    """A whole number in ASCII digits, with an optional sign; else a ValueError saying so."""
    value = _text(text, "a whole number", "16")
    if not _WHOLE.fullmatch(value):
        raise ValueError("not a whole number in ASCII digits 0-9; write e.g. 16")
    return int(value)


def real(text: str) -> float:
    """A decimal number in ASCII digits (1.5, 2e-3); nan and inf are not numbers here."""
    value = _text(text, "a decimal number", "1.5")
    if not _REAL.fullmatch(value):
        raise ValueError("not a decimal number in ASCII digits 0-9; write e.g. 1.5 or 2e-3")
    return float(value)


def tokens(text: str) -> int:
    """A length in tokens: 8192, or with vLLM's suffixes 8k (8000) and 8K (8192)."""
    value = _text(text, "a number of tokens", "8192, 8k (8000) or 8K (8192)")
    match = TOKENS.fullmatch(value)
    if match is None:
        raise ValueError(
            "not a whole number of tokens in ASCII digits 0-9; write e.g. 8192, 8k (8000) or "
            "8K (8192)"
        )
    return int(match.group(1)) * SUFFIXES[match.group(2)]


def within(
    value: float, low: float, high: float, *, above: bool = False, below: bool = False
) -> str:
    """Why `value` is out of its range ("" when it is in): from `low` to `high`, each included
    unless `above` (low excluded) or `below` (high excluded)."""
    if (value > low if above else value >= low) and (value < high if below else value <= high):
        return ""
    return f"{shown(value)} is out of range: give {span(low, high, above=above, below=below)}"


def span(low: float, high: float, *, above: bool = False, below: bool = False) -> str:
    """'1 to 65,535', 'more than 0 to 604,800', '0 to less than 1'."""
    first = f"more than {shown(low)}" if above else shown(low)
    last = f"less than {shown(high)}" if below else shown(high)
    return f"{first} to {last}"


def shown(value: float) -> str:
    """65,535 or 0.05 (a whole float below 10^16 as a whole number)."""
    if isinstance(value, int):
        return f"{value:,}"
    if math.isfinite(value) and value.is_integer() and abs(value) < 1e16:
        return f"{int(value):,}"
    return f"{value:g}"


def concurrencies(text: str) -> list[int]:
    """'16,64,256' (or spaces) -> [16, 64, 256]: distinct, each 1 to CONCURRENCY_MAX."""
    example = 'write it as "4 8" or 16,64,256'
    values = []
    for part in (p for p in re.split(r"[,\s]+", text.strip()) if p):
        try:
            value = whole(part)
        except ValueError as exc:
            raise ValueError(f"{part!r}: {exc}") from None
        if problem := within(value, 1, CONCURRENCY_MAX):
            raise ValueError(problem)
        if value in values:
            raise ValueError(f"{value} is given twice; {example}")
        values.append(value)
    if not values:
        raise ValueError(f"no concurrency given; {example}")
    return values


def argument(low: float, high: float) -> Callable[[str], int]:
    """An argparse type: a whole number (the rule above), in range."""

    def typed(text: str) -> int:
        try:
            value = whole(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None
        if problem := within(value, low, high):
            raise argparse.ArgumentTypeError(problem)
        return value

    return typed
