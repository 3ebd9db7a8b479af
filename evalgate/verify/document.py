"""A sweep's verdict as its document, valid against verdict.schema.json (written by --json): the
exact texts (outside.json_text scrubs the secrets as it writes them)."""

from __future__ import annotations

from typing import Any

from evalgate._version import __version__
from evalgate.verify import baseline_report
from evalgate.verify.records import OUTCOMES, CheckRow
from evalgate.verify.sweep import Report


def _check(row: CheckRow) -> dict[str, Any]:
    return {
        "task": row.task,
        "metric": row.metric,
        "filter": row.filter,
        "value": row.value,
        "stderr": row.stderr,
        "n": row.n,
        "ci_low": row.low,
        "ci_high": row.high,
        "threshold": row.threshold,
        "matched": row.matched,
        "outcome": row.outcome,
    }


def document(report: Report) -> dict[str, Any]:
    """The verdict document, valid against verdict.schema.json."""
    expect = report.expectation
    return {
        "schema": "evalgate.verdict/1",
        "evalgate_version": __version__,
        "verdict": report.verdict,
        "exit_code": report.exit_code,
        "reason": report.reason,
        "paths": list(report.paths),
        "thresholds_file": report.thresholds_file,
        "min_samples": report.min_samples,
        "confidence": 0.95,
        "expect": None
        if expect is None
        else {
            "source": expect.source,
            "count": expect.count,
            "configs": [dict(c) for c in expect.configs],
        },
        "counts": {outcome: report.count(outcome) for outcome in OUTCOMES},
        "entries": [
            {
                "key": e.key,
                "outcome": e.outcome,
                "reason": e.reason,
                "path": e.path,
                "source": e.source,
                "model": e.model,
                "labels": dict(e.labels) if e.labels is not None else None,
                "status": e.status,
                "stage": e.stage,
                "checks": [_check(c) for c in e.checks],
                "versus": baseline_report.versus_document(e.versus),
            }
            for e in report.entries
        ],
        "ignored": [{"path": n.path, "reason": n.reason} for n in report.ignored],
        "baseline": baseline_report.summary_document(report.baseline),
    }
