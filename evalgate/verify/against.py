"""A sweep's verdict against its baseline: each config's finding (baseline.py) on its verdict line,
the waivers applied, the verdict reached again (docs/verify.md, "Against the last good sweep").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from datetime import date
from typing import TYPE_CHECKING

import msgspec
from msgspec import structs

from evalgate.compare.runs import Run
from evalgate.errors import UsageError
from evalgate.settings.environment import not_a_margin
from evalgate.verify import baseline as pairing
from evalgate.verify.expect import config_identity
from evalgate.verify.records import BaselineSummary, Entry, Versus
from evalgate.verify.sweep import Report, Rule, ordered, summarise
from evalgate.verify.waivers import Waivers, expired_reason

if TYPE_CHECKING:
    from evalgate.history.look import HistoryBaseline


class BaselineRequest(msgspec.Struct, frozen=True):
    """What --baseline asks for: the baseline sweep's paths, the margin, the waivers."""

    paths: tuple[str, ...]
    max_drop: float
    waivers: Waivers | None = None
    today: date | None = None
    """The day waivers expire against (None: today)."""

    def __post_init__(self) -> None:
        refused = not_a_margin(self.max_drop)
        if refused is not None:
            raise UsageError(refused)


def _regressed(entry: Entry, versus: Versus, waivers: Waivers | None, expired: set[str]) -> Entry:
    """A regressed config's line: waived, or failing."""
    waiver = waivers.find(entry.key) if waivers else None
    if waiver is not None and waiver.config not in expired:
        return structs.replace(entry, versus=structs.replace(versus, waiver=waiver))
    if entry.outcome not in ("pass", "inconclusive"):
        return structs.replace(entry, versus=versus)
    lapsed = " (its waiver expired)" if waiver is not None else ""
    reason = f"regressed against the baseline{lapsed}: {versus.reason}; its floor: {entry.reason}"
    return structs.replace(entry, outcome="regression", reason=reason, versus=versus)


def _lines(
    report: Report, found: dict[int, Versus], broken: dict[int, str], request: BaselineRequest
) -> list[Entry]:
    waivers = request.waivers
    expired = (
        {w.config for w in waivers.expired(request.today or date.today())} if waivers else set()
    )
    entries: list[Entry] = []
    index = 0
    for entry in report.entries:
        if entry.source is None:  # a problem with the set, a malformed file
            entries.append(entry)
            continue
        if index in broken:
            why = f"its answers cannot be read to pair with the baseline's: {broken[index]}"
            entries.append(
                structs.replace(
                    entry,
                    outcome="malformed",
                    reason=why,
                    versus=Versus.listed("not compared", why),
                )
            )
        elif found[index].standing == "regression":
            entries.append(_regressed(entry, found[index], waivers, expired))
        else:
            entries.append(structs.replace(entry, versus=found[index]))
        index += 1
    if waivers is not None:
        entries += [
            Entry(w.config, "expired", expired_reason(w, waivers.source))
            for w in waivers.waivers
            if w.config in expired
        ]
    return entries


def _tally(entries: Sequence[Entry]) -> str:
    """The findings against the baseline, each config's once: one whose outcome is already
    "regression" (counted with the outcomes) is not counted again."""
    compared = [e.versus for e in entries if e.versus is not None and e.outcome != "regression"]
    counts = Counter(versus.standing for versus in compared)
    waived = sum(1 for versus in compared if versus.waiver is not None)
    listed = ", ".join(f"{n} {standing}" for standing, n in counts.most_common())
    return listed + (f" ({waived} waived)" if waived else "")


def judge_against(
    report: Report, rule: Rule, request: BaselineRequest, history: HistoryBaseline | None = None
) -> Report:
    """The report with every config compared with the baseline's, and its verdict again; the
    baseline is the sweep at request.paths, or with `history` each config's run taken from a
    history (evalgate.history.look.baseline)."""
    results = [e for e in report.entries if e.source is not None]
    if history is None:
        baseline, notes = pairing.baseline_entries(request.paths, rule)
        load: Callable[[Entry], Run] = pairing.load_entry
        pairing.refuse_own_runs(report.paths, request.paths, results, baseline)
    else:
        baseline, notes, load = history.entries, history.unreadable, history.load
    waivers = request.waivers
    found, broken = pairing.findings(results, baseline, request.max_drop, load)
    entries = _lines(report, found, broken, request)
    present = {config_identity(e.model, e.labels, e.task) for e in results}
    absent = [b for b in baseline if config_identity(b.model, b.labels, b.task) not in present]
    if report.expectation is not None:
        listed = {(e.key, e.outcome) for e in entries}
        entries += [
            b.problem(
                "missing", f"{b.key} is in the baseline ({b.path}) but has no result in this sweep"
            )
            for b in absent
            if (b.key, "missing") not in listed
        ]
    entries = ordered(entries)
    verdict, code, reason = summarise(entries)
    keys = {e.key for e in results}
    summary = BaselineSummary(
        paths=request.paths,
        max_drop=request.max_drop,
        configs=len(baseline),
        waivers=waivers.source if waivers else None,
        missing=tuple(absent),
        unused_waivers=tuple(w for w in waivers.waivers if w.config not in keys) if waivers else (),
        unreadable=tuple(notes.malformed),
    )
    tally = _tally(entries)
    against = f"; against the baseline: {tally}" if found and tally else ""
    missed = f", {len(absent)} of its configs missing" if absent else ""
    return structs.replace(
        report,
        verdict=verdict,
        exit_code=code,
        reason=reason + against + missed,
        entries=tuple(entries),
        baseline=summary,
    )
