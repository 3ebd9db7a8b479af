"""--waivers FILE: regressions against the baseline that someone accepted, each until a date
(docs/verify.md, "Against the last good sweep", waivers).
"""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path
from typing import Any

import msgspec

from evalgate.errors import ArtifactError, UsageError
from evalgate.reader import read, read_bytes
from evalgate.verify.records import Waiver

FIELDS = ("config", "reason", "who", "until")
DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
"""The one form of a date in a file evalgate reads: YYYY-MM-DD, ASCII digits."""
_EXAMPLE = (
    "[{config: <the config's key as verify prints it>, reason: <why it is accepted>, who: "
    "<who accepted it>, until: <YYYY-MM-DD>}]"
)


class Waivers(msgspec.Struct, frozen=True):
    """The waivers of one file, by config key."""

    source: str
    waivers: tuple[Waiver, ...]

    def find(self, key: str) -> Waiver | None:
        return next((w for w in self.waivers if w.config == key), None)

    def expired(self, today: date) -> list[Waiver]:
        return [w for w in self.waivers if date.fromisoformat(w.until) < today]


def _waiver(entry: Any, where: str) -> Waiver:
    if not isinstance(entry, dict):
        raise UsageError(f"{where} is {entry!r}, not an object. Write each waiver as {_EXAMPLE}.")
    missing = [name for name in FIELDS if name not in entry]
    unknown = sorted(str(name) for name in entry if name not in FIELDS)
    if missing or unknown:
        raise UsageError(
            f"{where} has {'no ' + ', '.join(missing) if missing else ''}"
            f"{'; ' if missing and unknown else ''}"
            f"{'unknown field(s) ' + ', '.join(unknown) if unknown else ''}: a waiver has "
            f"exactly {', '.join(FIELDS)}. Write it as {_EXAMPLE}."
        )
    for name in FIELDS:
        value = entry[name]
        if not isinstance(value, str) or not value.strip():
            raise UsageError(
                f"{where}: {name} is {value!r}, not a non-empty text. Write it as {_EXAMPLE}."
            )
    until = entry["until"].strip()
    try:  # fromisoformat also reads 2026-W26 and 20260630: one form, the documented one
        valid = DATE.fullmatch(until) is not None and date.fromisoformat(until) is not None
    except ValueError:
        valid = False
    if not valid:
        raise UsageError(
            f"{where}: until is {entry['until']!r}, not a date. Write the last day the waiver "
            "holds as YYYY-MM-DD, e.g. 2026-06-30."
        )
    return Waiver(*(entry[name].strip() for name in FIELDS))


def parse_waivers(data: Any, source: str) -> Waivers:
    """A list of waivers, or {"waivers": [...]}; else a UsageError saying what is wrong."""
    if isinstance(data, dict) and set(data) == {"waivers"}:
        data = data["waivers"]
    if not isinstance(data, list):
        raise UsageError(
            f"--waivers {source} holds {type(data).__name__}, not a list of waivers. Write "
            f"{_EXAMPLE}."
        )
    waivers = [_waiver(entry, f"--waivers {source} entry {i}") for i, entry in enumerate(data)]
    keys = [w.config for w in waivers]
    repeated = sorted({k for k in keys if keys.count(k) > 1})
    if repeated:
        raise UsageError(
            f"--waivers {source} waives {repeated[0]!r} twice: keep one waiver per config."
        )
    return Waivers(source, tuple(waivers))


def load_waivers(path: str) -> Waivers:
    """--waivers: a .json file read as JSON, any other as YAML (JSON is YAML too)."""
    from evalgate.errors import YamlRefused
    from evalgate.reader import MAX_CHARS, load_yaml

    try:
        if Path(path).suffix.lower() == ".json":
            data = read(path)
        else:
            raw = read_bytes(path, MAX_CHARS)
            data = load_yaml(raw.decode("utf-8"))
    except ArtifactError as exc:
        raise UsageError(f"--waivers: {exc.message}") from exc
    except UnicodeDecodeError as exc:
        raise UsageError(f"--waivers: {path} is not UTF-8 text ({exc.reason}).") from exc
    except YamlRefused as exc:
        raise UsageError(f"--waivers: {path} {exc.message}.") from exc
    return parse_waivers(data, path)


def describe(waiver: Waiver) -> str:
    """'waived until 2026-06-30 by jane: fp8 KV cache accepted'."""
    return f"waived until {waiver.until} by {waiver.who}: {waiver.reason}"


def expired_reason(waiver: Waiver, source: str) -> str:
    """Why an expired waiver fails the sweep, and what to do."""
    return (
        f"the waiver of {waiver.config} in {source} ({waiver.reason}; {waiver.who}) expired on "
        f"{waiver.until}: fix the regression it accepted, renew the waiver with a new date, or "
        "remove it if the config no longer regresses"
    )
