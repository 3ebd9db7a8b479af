"""A sweep's verdict as its document, valid against verdict.schema.json (written by --json): the
exact texts (outside.json_text scrubs the secrets as it writes them). An entry, its checks and
its versus are written as their records are (records.py names their fields as the schema does).
"""

from __future__ import annotations

from typing import Any

import msgspec

from evalgate._version import __version__
from evalgate.verify.records import OUTCOMES, BaselineSummary
from evalgate.verify.sweep import Report


def _plain(value: Any) -> Any:
    """A record as JSON reads back: msgspec.to_builtins keeps tuples, a JSON array is a list."""
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


def _baseline(summary: BaselineSummary | None) -> dict[str, Any] | None:
    """The verdict document's ``baseline`` object: a missing config by its key and path, an
    unused waiver by its config."""
    if summary is None:
        return None
    baseline: dict[str, Any] = _plain(msgspec.to_builtins(summary))
    baseline["missing"] = [{"key": e.key, "path": e.path} for e in summary.missing]
    baseline["unused_waivers"] = [w.config for w in summary.unused_waivers]
    return baseline


def document(report: Report) -> dict[str, Any]:
    """The verdict document, valid against verdict.schema.json."""
    entries = _plain(msgspec.to_builtins(report.entries))
    for entry, held in zip(entries, report.entries, strict=True):
        for check, row in zip(entry["checks"], held.checks, strict=True):
            after = {name: check.pop(name) for name in ("threshold", "matched", "outcome")}
            check.update(ci_low=row.low, ci_high=row.high, **after)  # the schema's order
        for flip in entry["versus"]["lost_questions"] if entry["versus"] else ():
            del flip["change"]  # every question listed was lost
        if (expected := entry.pop("expected")) is not None:
            entry["labels"] = expected  # the manifest's words, in its order, as it gave them
    return {
        "schema": "evalgate.verdict/2",
        "evalgate_version": __version__,
        "verdict": report.verdict,
        "exit_code": report.exit_code,
        "reason": report.reason,
        "paths": list(report.paths),
        "thresholds_file": report.thresholds_file,
        "min_samples": report.min_samples,
        "confidence": 0.95,
        "expect": _plain(msgspec.to_builtins(report.expectation)),
        "counts": {outcome: report.count(outcome) for outcome in OUTCOMES},
        "entries": entries,
        "ignored": _plain(msgspec.to_builtins(report.ignored)),
        "baseline": _baseline(report.baseline),
    }
