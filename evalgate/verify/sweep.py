"""`evalgate verify`: gate a whole sweep's results at once, and check the set is complete.

Every result found (collect.py) is gated on its own threshold (thresholds.py) by the same rule
as `evalgate run` (gate/verdict.py, with the parameters the run recorded); then the set itself
is checked (expect.py): nothing found is a failure, two results for one config are a failure,
and with an expectation (``--expect``) a missing or unexpected config is too. A run that stopped
early (``--early-stop``) is decided by its own sequential test at the threshold resolved here,
as the gate rule says.

The sweep's verdict: FAIL (exit 1) if any result fails, errored, is malformed, missing,
duplicated or unexpected, or nothing was found; else INCONCLUSIVE (exit 5) if any score is too
uncertain to decide; else PASS (exit 0).
"""

from __future__ import annotations

import contextlib
import gc
import math
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import msgspec
from msgspec import structs

from evalgate.errors import ExitCode, ThresholdsError
from evalgate.evidence.model import Check, Score
from evalgate.gate.stats import standard_error
from evalgate.gate.verdict import GATED_METRIC, decide
from evalgate.tasks.dataset import full_size
from evalgate.thresholds import TASK_KEY, Floor, Thresholds, resolve_floor
from evalgate.verify.collect import Collection, collect
from evalgate.verify.expect import Expectation, check_set, config_key, config_keys
from evalgate.verify.expect import load_expectation as load_expectation  # noqa: PLC0414 - for cli_verify
from evalgate.verify.records import (
    FAILING,
    OUTCOMES,
    CheckRow,
    Entry,
    Found,
    Note,
    Outcome,
    Verdict,
)


class Report(msgspec.Struct, frozen=True):
    """The sweep's verdict and every line behind it."""

    verdict: Verdict
    exit_code: int
    reason: str
    entries: tuple[Entry, ...]
    paths: tuple[str, ...]
    thresholds_file: str
    min_samples: int | None
    """None: what each run recorded, else each task's full test set (tasks.dataset.full_size)."""
    expectation: Expectation | None
    ignored: tuple[Note, ...]

    def count(self, outcome: Outcome) -> int:
        """How many entries have this outcome."""
        return sum(1 for entry in self.entries if entry.outcome == outcome)


# -- gating one result ---------------------------------------------------------------------------


class Floors:
    """resolve_floor, once per distinct (model, labels, task): a sweep repeats them."""

    def __init__(self, thresholds: Thresholds) -> None:
        self.thresholds = thresholds
        self._cache: dict[tuple[Any, ...], Floor | ThresholdsError] = {}

    def find(self, model: str | None, labels: Mapping[str, Any], task: str) -> Floor:
        get = labels.get
        key = (
            model,
            get("model_prefix"),
            get("hardware"),
            get("framework"),
            get("precision"),
            get("kv_cache_dtype"),
            task,
        )
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = self._resolve(model, labels, task)
        if isinstance(found, ThresholdsError):
            raise found
        return found

    def _resolve(
        self, model: str | None, labels: Mapping[str, Any], task: str
    ) -> Floor | ThresholdsError:
        try:
            return resolve_floor(self.thresholds, model, labels, task)
        except ThresholdsError as exc:
            if task != TASK_KEY and task.startswith(TASK_KEY):  # gsm8k_evalgate_chat and kin
                return self._resolve(model, labels, TASK_KEY)
            return exc


def _run_problem(found: Found) -> str | None:
    """Why a run's own status rules out a score verdict (errored, aborted, unfinished)."""
    if found.status in ("error", "aborted"):
        where = f" in stage {found.stage}" if found.stage else ""
        return f"run {found.status}{where}: {found.reason}"
    if found.status == "skipped":
        return f"run skipped: {found.reason}"
    if found.status == "running":
        return (
            f"the run never finished (status running, stage {found.stage}): it was killed, "
            "or its result was collected too early"
        )
    return None


def _row(score: Score, check: Check, matched: str) -> CheckRow:
    return CheckRow(
        task=score.task,
        metric=check.metric,
        filter=check.filter,
        value=check.value,
        stderr=standard_error(check.value, score.n, score.stderr),
        n=score.n,
        low=check.low if check.low is not None else 0.0,
        high=check.high if check.high is not None else 1.0,
        threshold=check.threshold,
        matched=matched,
        outcome=check.outcome or "fail",
    )


Decision = tuple[Outcome, str, tuple[CheckRow, ...]]

_KEPT_DECISIONS = 4096
"""Distinct decisions a sweep keeps (Rule): a GSM8K score is one of 1,320 fractions, so a
sweep's runs share a few dozen; past this many, the rest are decided without being kept."""


def _decide(
    found: Found, floor: Floor, min_samples: int, problems: Sequence[str], doubts: Sequence[str]
) -> Decision:
    """The gate rule on one result, with the parameters and run-level findings it recorded."""
    gated = [s for s in found.scores if s.metric == GATED_METRIC]
    verdict = decide(
        found.scores,
        floor.value,
        min_samples=min_samples,
        matched=floor.matched,
        problems=problems,
        doubts=doubts,
        early_stop=found.early_stop,
    )
    rows = tuple(_row(s, c, floor.matched) for s, c in zip(gated, verdict.checks, strict=True))
    return verdict.outcome, verdict.reason, rows


def _same_text(scores: Sequence[Score]) -> bool:
    """Whether scores equal to these are written the same (a zero may be -0.0, and NaN equals
    nothing): only then may their decision be shared."""
    return all(
        s.value and math.isfinite(s.value) and (s.stderr is None or s.stderr) for s in scores
    )


class Rule:
    """The gate rule as one sweep applies it, to one run at a time: each run's threshold found
    once per distinct config (Floors), and each decision made once per distinct set of scores,
    floor and recorded parameters (the rule is pure; the rows and reason are then shared)."""

    def __init__(self, thresholds: Thresholds, min_samples: int | None = None) -> None:
        self.floors = Floors(thresholds)
        self.min_samples = min_samples
        """None: what each run recorded, else each task's full test set."""
        self._decided: dict[tuple[Any, ...], Decision] = {}

    def decision(self, found: Found) -> Decision:
        """The gate rule on one result's scores (a ThresholdsError when no threshold applies)."""
        gated = [s.task for s in found.scores if s.metric == GATED_METRIC]
        task = gated[0] if gated else TASK_KEY
        floor = self.floors.find(found.model, found.labels, task)
        recorded = found.verdict
        min_samples = self.min_samples
        if min_samples is None:
            min_samples = recorded.min_samples if recorded is not None else full_size(task)
        if recorded is not None:
            problems, doubts = tuple(recorded.problems), tuple(recorded.doubts)
        else:  # written before results recorded their verdict
            failed = found.status == "fail" and not found.failed_on_scores
            problems, doubts = ((f"the run failed: {found.reason}",) if failed else ()), ()
        if found.early_stop is not None or not _same_text(found.scores):
            return _decide(found, floor, min_samples, problems, doubts)
        key = (found.scores, floor, min_samples, problems, doubts)
        decided = self._decided.get(key)
        if decided is None:
            decided = _decide(found, floor, min_samples, problems, doubts)
            if len(self._decided) < _KEPT_DECISIONS:
                self._decided[key] = decided
        return decided

    def gate(self, found: Found, key: str) -> Entry:
        """The verdict on one result: its run's own status, then the gate rule on its scores."""
        checks: tuple[CheckRow, ...] = ()
        problem = _run_problem(found)
        if problem is not None:
            outcome: Outcome = "error"
            reason = problem
        else:
            try:
                outcome, reason, checks = self.decision(found)
            except ThresholdsError as exc:
                outcome, reason = "fail", exc.message
        return Entry(
            key,
            outcome,
            reason,
            found.path,
            found.source,
            found.model,
            found.labels,
            found.status,
            found.stage,
            checks,
        )


# -- the sweep -----------------------------------------------------------------------------------


def _order(entry: Entry, shared: dict[str, str] | None = None) -> tuple[Any, ...]:
    """Entries by config, numbers as numbers (conc=4 before conc=16); the rest by name after.

    A config's name is its key before its numbers (isl=, osl=, conc=); `shared` keeps one copy
    of each name (a sort holds every key)."""
    labels = entry.labels
    if labels is None:
        return (1, entry.key, "", 0, 0, 0, entry.path or "", entry.outcome)
    get = labels.get
    key = entry.key
    name, cut, _ = key.partition(" isl=")
    if not cut:  # a partial config: its numbers start later, if anywhere
        name = name.partition(" osl=")[0].partition(" conc=")[0]
    return (
        0,
        str(get("model_prefix") or entry.model),
        name if shared is None else shared.setdefault(name, name),
        get("isl") or 0,
        get("osl") or 0,
        get("concurrency") or 0,
        key,
        entry.path or "",
        entry.outcome,
    )


def summarise(entries: Sequence[Entry], results: int, configs: int) -> tuple[Verdict, int, str]:
    """(verdict, exit code, one-line reason) for all the entries."""
    tally = Counter(e.outcome for e in entries)
    counts = {o: tally[o] for o in OUTCOMES}
    listed = ", ".join(f"{n} {o}" for o, n in counts.items() if n)
    line = f"{results} results for {configs} configs: {listed}"
    if any(counts[o] for o in FAILING):
        empties = [e.reason for e in entries if e.outcome == "empty"]
        return "fail", int(ExitCode.FAIL), "; ".join(empties) if results == 0 else line
    if counts["inconclusive"]:
        return "inconclusive", int(ExitCode.INCONCLUSIVE), line
    return "pass", int(ExitCode.PASS), line


_BATCH = 4096
"""Results gated between two releases (judge_sweep)."""


def judge_sweep(
    collection: Collection,
    rule: Rule,
    *,
    paths: Iterable[str],
    expectation: Expectation | None = None,
    release: bool = False,
) -> Report:
    """Gate every result found by `rule` (the one that judged the collection's `entries` as
    they were read, if any), check the set, and reach the sweep's verdict.

    Pure, unless `release`: then each result found is let go once gated (the collection's
    `found` ends empty), so a sweep never holds every run read and every verdict line at once.
    """
    judged, found = collection.entries, collection.found
    count = len(judged) + len(found)
    keys = config_keys(
        [*judged, *found],
        [e.key for e in judged] + [config_key(f.model, f.labels) for f in found],
    )
    configs = len(set(keys))
    # the runs judged as they were read, under their keys told apart from other configs'
    told = zip(judged, keys[: len(judged)], strict=True)
    gated = [e if e.key == k else structs.replace(e, key=k) for e, k in told]
    while len(gated) < count:
        start = 0 if release else len(gated) - len(judged)
        batch = found[start : start + _BATCH]
        gated += [rule.gate(f, keys[len(gated) + i]) for i, f in enumerate(batch)]
        if release:
            del found[:_BATCH], batch
    set_problems = check_set(gated, expectation)
    entries = gated  # the same list, grown: 10^5 results need not be listed twice
    entries += [Entry(n.path, "malformed", n.reason, n.path) for n in collection.malformed]
    entries += [
        Entry(root, "empty", f"no eval results found under {root}", root)
        for root in collection.empty
    ]
    entries += [
        Entry(p.key, p.outcome, p.reason, p.path, model=p.model, labels=p.labels)
        for p in set_problems
    ]
    shared: dict[str, str] = {}
    entries.sort(key=lambda entry: _order(entry, shared))
    results = count + len(collection.malformed)
    verdict, code, reason = summarise(entries, results, configs)
    return Report(
        verdict,
        code,
        reason,
        tuple(entries),
        tuple(paths),
        rule.floors.thresholds.path,
        rule.min_samples,
        expectation,
        tuple(collection.ignored),
    )


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector paused meanwhile (and restored after): a sweep's records
    are millions of containers, none in a cycle (reference counting frees them), and the
    collector would rescan the growing heap again and again: it doubled verify's time at
    100,000 artifacts, and its passes over the finished report cost a tenth of a second at
    10,000 while the verdict was written."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def verify(
    paths: Sequence[str],
    thresholds: Thresholds,
    *,
    expectation: Expectation | None = None,
    min_samples: int | None = None,
) -> Report:
    """Collect every result under `paths` and decide (reads files; never prints or exits), the
    collector paused (collector_paused)."""
    rule = Rule(thresholds, min_samples)

    def judge(found: Found) -> Entry:
        return rule.gate(found, config_key(found.model, found.labels))

    with collector_paused():
        return judge_sweep(
            collect(paths, judge), rule, paths=paths, expectation=expectation, release=True
        )
