"""A sweep's verdict as JUnit XML (templates/junit.xml), one testcase per config
(docs/verify.md, "Outputs").
"""

from __future__ import annotations

from typing import NamedTuple

from evalgate import templates
from evalgate.verify import baseline_report
from evalgate.verify.records import FAILING, Entry
from evalgate.verify.sweep import Report


class Case(NamedTuple):
    """A config's testcase: its entries (a malformed file is its own case), the first path
    given, and how it ended: a failure or an error (`ended`, with the first bad entry), skipped
    (inconclusive), or passed."""

    key: str
    entries: list[Entry]
    path: str | None
    ended: str | None
    first: Entry | None

    @property
    def lines(self) -> list[tuple[Entry, str | None]]:
        """Each entry with its line against the baseline, if any."""
        return [
            (e, baseline_report.junit_line(e.versus) if e.versus is not None else None)
            for e in self.entries
        ]


def _case(key: str, entries: list[Entry]) -> Case:
    path = next((e.path for e in entries if e.path), None)
    bad = [e for e in entries if e.outcome in FAILING]
    if bad:
        broken = [e for e in bad if e.outcome in ("error", "malformed")]
        ended = "error" if broken and len(broken) == len(bad) else "failure"
        return Case(key, entries, path, ended, bad[0])
    unsure = next((e for e in entries if e.outcome == "inconclusive"), None)
    return Case(key, entries, path, None, unsure)


def junit(report: Report) -> str:
    """JUnit XML: one testcase per config (a malformed file is its own case)."""
    groups: dict[str, list[Entry]] = {}
    for entry in report.entries:
        groups.setdefault(entry.key, []).append(entry)
    cases = [_case(key, entries) for key, entries in groups.items()]
    tally = {
        "tests": len(cases),
        "failures": sum(1 for c in cases if c.ended == "failure"),
        "errors": sum(1 for c in cases if c.ended == "error"),
        "skipped": sum(1 for c in cases if c.ended is None and c.first is not None),
    }
    return templates.render("junit.xml", cases=cases, tally=tally)
