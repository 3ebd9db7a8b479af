"""`evalgate verify`: gate a whole sweep's results at once, and check the set is complete.

One stream in one process: each result found (collect.py) is gated as it is read, on its own
threshold (thresholds.py) by the same rule as `evalgate run` (gate/verdict.py, with the
parameters the run recorded), and only its verdict line is kept; then the set itself is checked
(expect.py): nothing found is a failure, two results for one config are a failure, and with an
expectation (``--expect``) a missing or unexpected config is too. A run that stopped early
(``--early-stop``) is decided by its own sequential test at the threshold resolved here, as the
gate rule says.

The sweep's verdict: FAIL (exit 1) if any result fails, errored, is malformed, missing,
duplicated or unexpected, or nothing was found; else INCONCLUSIVE (exit 5) if any score is too
uncertain to decide; else PASS (exit 0).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec
from msgspec import structs

from evalgate.errors import ExitCode, ThresholdsError, VerdictCode
from evalgate.evidence.model import Labels
from evalgate.gate.verdict import GATED_METRIC, decide, standard_error
from evalgate.tasks.dataset import full_size, known_name
from evalgate.thresholds import TASK_KEY, Floor, Thresholds, check_task_keys, resolve_floor
from evalgate.verify.collect import runs
from evalgate.verify.expect import Expectation, check_set, config_key, config_task, told_apart
from evalgate.verify.records import (
    FAILING,
    OUTCOMES,
    Baseline,
    CheckRow,
    Collection,
    Entry,
    Found,
    Note,
    Outcome,
    Verdict,
)


class Report(msgspec.Struct, frozen=True):
    """The sweep's verdict and every line behind it."""

    verdict: Verdict
    exit_code: VerdictCode
    reason: str
    entries: tuple[Entry, ...]
    paths: tuple[str, ...]
    thresholds_file: str
    min_samples: int | None
    """None: what each run recorded, else each task's full test set (tasks.dataset.full_size)."""
    expectation: Expectation | None
    ignored: tuple[Note, ...]
    baseline: Baseline | None = None
    """--baseline: what the sweep was compared with (each config's finding is its Versus)."""

    def count(self, outcome: Outcome) -> int:
        return sum(1 for entry in self.entries if entry.outcome == outcome)


# -- gating one result ---------------------------------------------------------------------------


def _run_problem(found: Found) -> str | None:
    """Why a run's own status rules out a score verdict (errored, aborted, unfinished)."""
    if found.status in ("error", "aborted"):
        where = f" in stage {found.stage}" if found.stage else ""
        return f"run {found.status}{where}: {found.reason}"
    if found.status == "skipped":
        return f"run skipped: {found.reason}"
    if found.status == "running" and found.holder is not None:
        return (
            f"still running (pid {found.holder}, which holds the folder's lock; last recorded "
            f"at stage {found.stage}): verify it once it has finished"
        )
    if found.status == "running":
        return (
            f"run interrupted: its result.json still says running, last recorded at stage "
            f"{found.stage}: the run was killed, or its result was collected before it "
            "finished; run it again"
        )
    return None


class Rule(msgspec.Struct, frozen=True):
    """The gate rule as one sweep applies it: its thresholds and its --min-samples."""

    thresholds: Thresholds
    min_samples: int | None = None
    """None: what each run recorded, else each task's full test set."""

    def floor(self, found: Found, task: str) -> Floor:
        """The run's threshold for `task` (gsm8k_evalgate_chat and kin fall back to gsm8k's)."""
        labels = structs.asdict(found.labels)
        try:
            return resolve_floor(self.thresholds, found.model, labels, task)
        except ThresholdsError:
            if task == TASK_KEY or not task.startswith(TASK_KEY):
                raise
            return resolve_floor(self.thresholds, found.model, labels, TASK_KEY)

    def decision(self, found: Found) -> tuple[Outcome, str, tuple[CheckRow, ...]]:
        """The gate rule on one result's scores (a ThresholdsError when no threshold applies)."""
        gated = [s for s in found.scores if s.metric == GATED_METRIC]
        task = gated[0].task if gated else (found.task or TASK_KEY)
        floor = self.floor(found, task)
        recorded = found.verdict
        min_samples = self.min_samples
        if min_samples is None:
            min_samples = recorded.min_samples if recorded is not None else full_size(task)
        if recorded is not None:
            problems, doubts = recorded.problems, recorded.doubts
        else:  # written before results recorded their verdict
            failed = found.status == "fail" and not found.failed_on_scores
            problems, doubts = ([f"the run failed: {found.reason}"] if failed else []), []
        verdict = decide(
            found.scores,
            floor.value,
            min_samples=min_samples,
            matched=floor.matched,
            problems=problems,
            doubts=doubts,
            early_stop=found.early_stop,
        )
        rows = tuple(
            CheckRow(
                task=known_name(s.task),  # as the reports name it: gsm8k, not lm-eval's name
                metric=GATED_METRIC,  # every row is the gated metric's: one string, not each file's
                filter=c.filter,
                value=c.value,
                stderr=standard_error(c.value, s.n, s.stderr),
                n=s.n,
                threshold=c.threshold,
                matched=floor.matched,
                outcome=c.outcome or "fail",
            )
            for s, c in zip(gated, verdict.checks, strict=True)
        )
        return verdict.outcome, verdict.reason, rows

    def gate(self, found: Found, key: str) -> Entry:
        """The verdict on one result: its run's own status, then the gate rule on its scores."""
        checks: tuple[CheckRow, ...] = ()
        outcome: Outcome = "error"
        reason = _run_problem(found)
        try:
            if reason is None:
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
            task=config_task(found.task),
        )


# -- the sweep -----------------------------------------------------------------------------------


def ordered(entries: Iterable[Entry]) -> list[Entry]:
    """Entries by config, numbers as numbers (conc=4 before conc=16); the rest by name after.
    A config's name is its key before its numbers (isl=, osl=, conc=). Sorted one name at a
    time: the keys of one name's entries are held at once, not the whole sweep's."""
    names: dict[tuple[Any, ...], list[Entry]] = {}
    for entry in entries:
        names.setdefault(_name(entry), []).append(entry)
    return [e for name in sorted(names) for e in sorted(names[name], key=_numbers)]


def _name(entry: Entry) -> tuple[Any, ...]:
    if entry.labels is None:
        return (1, entry.key, "")
    name, cut, _ = entry.key.partition(" isl=")
    if not cut:  # a partial config: its numbers start later, if anywhere
        name = name.partition(" osl=")[0].partition(" conc=")[0]
    return (0, str(entry.labels.model_prefix or entry.model), name)


def _numbers(entry: Entry) -> tuple[Any, ...]:
    labels = entry.labels or Labels()
    numbers = (labels.isl or 0, labels.osl or 0, labels.concurrency or 0)
    return (*numbers, entry.key, entry.path or "", entry.outcome)


def summarise(entries: Sequence[Entry]) -> tuple[Verdict, VerdictCode, str]:
    """(verdict, exit code, one-line reason) for all the entries. A result is a file read (a run
    gated, or a file that is malformed); a config is a key of a run gated."""
    results = sum(1 for e in entries if e.source is not None or e.outcome == "malformed")
    configs = len({e.key for e in entries if e.source is not None})
    tally = Counter(e.outcome for e in entries)
    counts = {o: tally[o] for o in OUTCOMES}
    listed = ", ".join(f"{n} {o}" for o, n in counts.items() if n)
    line = f"{results} results for {configs} configs: {listed}"
    if any(counts[o] for o in FAILING):
        empties = [e.reason for e in entries if e.outcome == "empty"]
        return "fail", ExitCode.FAIL.value, "; ".join(empties) if results == 0 else line
    if counts["inconclusive"]:
        return "inconclusive", ExitCode.INCONCLUSIVE.value, line
    return "pass", ExitCode.PASS.value, line


def gate_runs(rule: Rule, found: Iterable[Found]) -> list[Entry]:
    """Each run gated by `rule`, named by its config key; then, every task known, a thresholds
    key that misspells one refused (thresholds.check_task_keys)."""
    entries: list[Entry] = []
    tasks: set[str] = set()
    for run in found:
        entries.append(rule.gate(run, config_key(run.model, run.labels, run.task)))
        # lm-eval's names too (gsm8k_evalgate_chat): a floor may be keyed by them
        tasks |= {s.task for s in run.scores if s.metric == GATED_METRIC}
    check_task_keys(rule.thresholds, tasks | {e.task for e in entries if e.task})
    return entries


def judge_sweep(
    collection: Collection,
    rule: Rule,
    *,
    paths: Iterable[str],
    expectation: Expectation | None = None,
) -> Report:
    """Gate every result collected by `rule` (as each is read, where `collection.found` reads
    them), check the set, and reach the sweep's verdict."""
    entries = told_apart(gate_runs(rule, collection.found))
    entries += check_set(entries, expectation)
    entries += [Entry(n.path, "malformed", n.reason, n.path) for n in collection.malformed]
    entries += [
        Entry(root, "empty", f"no eval results found under {root}", root)
        for root in collection.empty
    ]
    entries = ordered(entries)
    verdict, code, reason = summarise(entries)
    return Report(
        verdict,
        code,
        reason,
        tuple(entries),
        tuple(paths),
        rule.thresholds.path,
        rule.min_samples,
        expectation,
        tuple(collection.ignored),
    )


def verify(
    paths: Sequence[str],
    thresholds: Thresholds,
    *,
    expectation: Expectation | None = None,
    min_samples: int | None = None,
) -> Report:
    """Find every result under `paths`, gating each as it is read, and decide (reads files;
    never prints or exits). baseline.judge_against compares the report with a baseline sweep."""
    notes = Collection()
    notes.found = runs(paths, notes)  # one stream: the notes are complete once it is read
    return judge_sweep(notes, Rule(thresholds, min_samples), paths=paths, expectation=expectation)
