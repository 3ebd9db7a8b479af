"""`evalgate verify SWEEP --baseline BASELINE`: each config of the sweep paired with the same
config of an earlier sweep as `evalgate compare` pairs two runs, one config at a time so that only
their tables are held; then each config's finding put on its verdict line, the waivers applied,
the verdict reached again (docs/verify.md, "Against the last good sweep"; docs/architecture.md).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import date
from pathlib import Path

import msgspec
from msgspec import structs

from evalgate.compare.comparison import Flip, compare_runs, p_text, points, stopped_early
from evalgate.compare.paired import ConfigPair, Finding, PairedCounts, judge_pairs
from evalgate.compare.runs import Difference, Run, load_run, protocol_differences
from evalgate.environment import not_a_margin
from evalgate.errors import ArtifactError, UsageError
from evalgate.evidence.artifacts import HOOK_NAME, META_NAME
from evalgate.evidence.outputs import run_identity
from evalgate.verify.collect import runs
from evalgate.verify.expect import config_identity
from evalgate.verify.harness_runs import UNRECORDED, load_lm_eval_run
from evalgate.verify.records import (
    Baseline,
    Collection,
    Entry,
    LostQuestion,
    Missing,
    Versus,
)
from evalgate.verify.sweep import Report, Rule, gate_runs, ordered, summarise
from evalgate.verify.waivers import Waivers, expired_reason

MAX_LOST = 20
"""Lost questions kept per regressed config (the count says how many there were)."""
SCORED = ("pass", "fail", "inconclusive")


class Pending(msgspec.Struct, frozen=True):
    """A config paired with its baseline, before the sweep's adjustment."""

    key: str
    baseline_path: str
    counts: dict[str, PairedCounts]
    lost: dict[str, tuple[Flip, ...]]
    warnings: tuple[str, ...]


def load_entry(entry: Entry) -> Run:
    """The run behind a gated result, its answers with it (an ArtifactError if unreadable)."""
    path = str(entry.path)  # a gated result always has its file
    if entry.source == "lm-eval":
        status = entry.outcome if entry.outcome in SCORED else "error"
        return load_lm_eval_run(path, status)  # type: ignore[arg-type]
    return load_run(Path(path))


def _recorded(difference: Difference, sources: tuple[str | None, str | None]) -> bool:
    """False for a difference that is only a field lm-eval's files do not record."""
    field = difference.field
    if field not in UNRECORDED and not field.startswith("dataset.sha256."):
        return True
    values = (difference.baseline, difference.candidate)
    return not any(s == "lm-eval" and v == "none" for s, v in zip(sources, values, strict=True))


def _protocol(base: Entry, entry: Entry, drift: Sequence[Difference]) -> Versus | None:
    """Listed as measured another way, for the differences both files record; else None."""
    sources = (base.source, entry.source)
    differences = tuple(d.describe() for d in drift if _recorded(d, sources))
    if not differences:
        return None
    reason = "measured another way than its baseline: " + "; ".join(differences)
    return Versus.listed("protocol", reason, base.path, differences)


def _paired(entry: Entry, base: Entry, was: Run, cand: Run, max_drop: float) -> Versus | Pending:
    """Two readable runs: listed when they cannot be paired, else their paired tables."""
    stopped = stopped_early(was, cand)
    if stopped is not None:
        return Versus.listed("early-stop", stopped, base.path)
    try:
        found = compare_runs(was, cand, max_drop=max_drop, allow_protocol_drift=True)
    except UsageError as exc:  # no filter in common: the protocol says why, if it can
        drift = protocol_differences(was, cand)
        return _protocol(base, entry, drift) or Versus.listed("not compared", exc.message)
    listed = _protocol(base, entry, found.drift)
    if listed is not None:
        return listed
    warnings = found.warnings
    if base.outcome != "pass":
        not_green = f"the baseline was not green: its run is {base.outcome} ({base.reason})"
        warnings = (f"{not_green}; compared all the same", *warnings)
    return Pending(
        entry.key,
        str(base.path),
        {f.filter: f.counts for f in found.filters},
        {f.filter: tuple(x for x in f.flips if x.change == "lost") for f in found.filters},
        warnings,
    )


def pair(
    entry: Entry, base: Entry, max_drop: float, load: Callable[[Entry], Run] = load_entry
) -> Versus | Pending:
    """One config against its baseline: listed (a Versus) or paired (Pending), each run read
    by `load`. An ArtifactError when the sweep's own run cannot be read."""
    if entry.outcome not in SCORED:
        why = f"the run has no answers to pair ({entry.outcome})"
        return Versus.listed("not compared", why, base.path)
    if base.outcome not in SCORED:
        why = f"the baseline's run has no answers to pair ({base.outcome}: {base.reason})"
        return Versus.listed("not compared", why, base.path)
    try:
        was = load(base)
    except ArtifactError as exc:
        return Versus.listed(
            "not compared", f"the baseline cannot be read: {exc.message}", base.path
        )
    return _paired(entry, base, was, load(entry), max_drop)


def _reason(judged: ConfigPair, max_drop: float, configs: int) -> str:
    deciding = judged.deciding
    counts, (low, high) = deciding.counts, deciding.interval
    table = (
        f"{points(counts.difference)} points on {deciding.filter} (95% CI [{points(low)}, "
        f"{points(high)}]), {counts.lost} lost and {counts.gained} gained of {counts.n}"
    )
    margin = f"{max_drop * 100:.1f}-point margin"
    adjusted = f"p = {p_text(judged.adjusted_drop)} after Holm's adjustment over {configs} configs"
    finding = judged.finding
    if finding is Finding.REGRESSION:
        return f"{table}: a significant drop ({adjusted}) of at least half the {margin}"
    if finding is Finding.IMPROVED:
        gain = f"p = {p_text(judged.adjusted_gain)} after Holm's adjustment"
        return f"{table}: a significant gain ({gain}) of at least half the {margin}"
    if finding is Finding.EQUIVALENT:
        return f"{table}: any drop is within the {margin}"
    if counts.difference < -max_drop / 2:
        return f"{table}: the drop reaches half the {margin} but is not significant ({adjusted})"
    return f"{table}: a drop beyond the {margin} cannot be ruled out"


def judge(pending: Sequence[Pending], max_drop: float) -> dict[str, Versus]:
    """The sweep's findings: every paired config judged at once (Holm over all of them)."""
    by_key = {p.key: p for p in pending}
    found: dict[str, Versus] = {}
    for judged in judge_pairs({p.key: p.counts for p in pending}, max_drop):
        deciding, paired = judged.deciding, by_key[judged.key]
        regressed = judged.finding is Finding.REGRESSION
        lost = paired.lost[deciding.filter][:MAX_LOST] if regressed else ()
        found[judged.key] = Versus(
            judged.finding.value,
            _reason(judged, max_drop, len(pending)),
            paired.baseline_path,
            filter=deciding.filter,
            difference=deciding.counts.difference,
            low=deciding.interval[0],
            high=deciding.interval[1],
            lost=deciding.counts.lost,
            gained=deciding.counts.gained,
            n=deciding.counts.n,
            p_value=judged.adjusted_drop,
            differences=(),
            lost_questions=msgspec.convert(lost, tuple[LostQuestion, ...], from_attributes=True),
            warnings=paired.warnings,
            waiver=None,
        )
    return found


def baseline_entries(paths: Sequence[str], rule: Rule) -> tuple[list[Entry], Collection]:
    """The baseline's results, gated by the sweep's rule."""
    notes = Collection()
    entries = gate_runs(rule, runs(paths, notes))
    if not entries:
        raise UsageError(
            f"--baseline {' '.join(paths)} holds no eval result to compare with. Pass the "
            "folder an earlier sweep's artifacts were downloaded to."
        )
    return entries, notes


def _identities(entries: Sequence[Entry]) -> dict[str, list[str]]:
    """The runs behind gated results by their identity (run_identity), with their paths; a
    line that is no run's result file (a run never made: its hook.json or meta_env.json; a
    file unreadable now) is left out. A result given by another name is still its run."""
    found: dict[str, list[str]] = {}
    for entry in entries:
        path = entry.path
        if path is None or entry.source is None or Path(path).name in (HOOK_NAME, META_NAME):
            continue
        try:
            found.setdefault(run_identity(path), []).append(path)
        except ArtifactError:
            continue
    return found


def _nested(one: str, other: str) -> bool:
    """One folder is the other, or inside it (through links too)."""
    one, other = os.path.realpath(one), os.path.realpath(other)
    return one == other or one.startswith(other.rstrip(os.sep) + os.sep)


def refuse_own_runs(
    sweep: Sequence[str], paths: Sequence[str], results: Sequence[Entry], baseline: Sequence[Entry]
) -> None:
    """A baseline whose runs are the sweep's own (the same folder, one inside the other, or
    the same runs by identity: a copy, a rename, a link) would compare each run with itself and
    turn the regression gate off: a UsageError (exit 2) naming them."""
    for given in paths:
        for root in sweep:
            if _nested(given, root) or _nested(root, given):
                raise UsageError(
                    f"--baseline {given} and the sweep's {root} are one folder, or one holds "
                    "the other: each run would be compared with itself. Pass the folder an "
                    "earlier sweep's artifacts were downloaded to."
                )
    ours = _identities(results)
    shared = [
        (run, where, ours[run]) for run, where in _identities(baseline).items() if run in ours
    ]
    if shared:
        shown = "; ".join(f"{base[0]} is {own[0]} (run {run})" for run, base, own in shared[:5])
        more = f"; and {len(shared) - 5} more" if len(shared) > 5 else ""
        raise UsageError(
            f"--baseline holds {len(shared)} of the sweep's own runs (the same run by what it "
            f"holds, wherever it lies): {shown}{more}. Each would be compared with itself: pass "
            "an earlier sweep's artifacts as the baseline."
        )


def findings(
    results: Sequence[Entry],
    baseline: Sequence[Entry],
    max_drop: float,
    load: Callable[[Entry], Run] = load_entry,
) -> tuple[dict[int, Versus], dict[int, str]]:
    """Each result of the sweep (by its index) with its Versus, one config read at a time (by
    `load`); and the results whose own answers cannot be read (ArtifactError's message)."""
    uses = Counter(config_identity(e.model, e.labels, e.task) for e in results)
    by_identity: dict[object, list[Entry]] = {}
    for base in baseline:
        by_identity.setdefault(config_identity(base.model, base.labels, base.task), []).append(base)
    found: dict[int, Versus | Pending] = {}
    broken: dict[int, str] = {}
    for index, entry in enumerate(results):
        config = config_identity(entry.model, entry.labels, entry.task)
        bases = by_identity.get(config, [])
        if not bases:
            found[index] = Versus.listed("new", "new in this sweep: no result in the baseline")
        elif uses[config] > 1 or len(bases) > 1:
            where = "this sweep" if uses[config] > 1 else "the baseline"
            why = f"{where} holds more than one result for this config: which to pair is unknown"
            found[index] = Versus.listed("not compared", why, bases[0].path)
        else:
            try:
                found[index] = pair(entry, bases[0], max_drop, load)
            except ArtifactError as exc:
                broken[index] = exc.message
    judged = judge([p for p in found.values() if isinstance(p, Pending)], max_drop)
    return {i: judged[v.key] if isinstance(v, Pending) else v for i, v in found.items()}, broken


# The verdict against the baseline.


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
            listed = Versus.listed("not compared", why)
            entries.append(structs.replace(entry, outcome="malformed", reason=why, versus=listed))
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


class HistoryBaseline(msgspec.Struct, frozen=True):
    """Each of a sweep's configs with its last passing unmarked recorded run, and how to read
    a run of either side for pairing."""

    entries: list[Entry]
    unreadable: Collection
    load: Callable[[Entry], Run]


def judge_against(
    report: Report, rule: Rule, request: BaselineRequest, history: HistoryBaseline | None = None
) -> Report:
    """The report with every config compared with the baseline's, and its verdict again; the
    baseline is the sweep at request.paths, or with `history` each config's run taken from a
    history (evalgate.history.look.baseline)."""
    results = [e for e in report.entries if e.source is not None]
    if history is None:
        baseline, notes = baseline_entries(request.paths, rule)
        load: Callable[[Entry], Run] = load_entry
        refuse_own_runs(report.paths, request.paths, results, baseline)
    else:
        baseline, notes, load = history.entries, history.unreadable, history.load
    waivers = request.waivers
    found, broken = findings(results, baseline, request.max_drop, load)
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
    summary = Baseline(
        paths=request.paths,
        max_drop=request.max_drop,
        results=len(baseline),
        waivers_file=waivers.source if waivers else None,
        missing=tuple(Missing(key=b.key, path=b.path) for b in absent),
        unused_waivers=tuple(w.config for w in waivers.waivers if w.config not in keys)
        if waivers
        else (),
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
