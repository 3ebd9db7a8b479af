"""Did a change cost accuracy? Two runs over the same questions, paired per filter.

compare_runs: both runs loaded, one stopped early or measured another way refused, the answers
paired per (question, repeat), each filter classified, the worst deciding. What each step means
and why: docs/compare.md.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from evalgate.compare.paired import (
    Cluster,
    Finding,
    PairedCounts,
    classify,
    design_effect,
)
from evalgate.compare.reason import filter_reason, questions_to_settle
from evalgate.compare.runs import Difference, Run, format_doc_ids, load_run, protocol_differences
from evalgate.errors import ExitCode, UsageError
from evalgate.evidence.fields import Count
from evalgate.evidence.model import to_document
from evalgate.settings.environment import DEFAULT_MAX_DROP, not_a_margin


class Flip(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A question answered rightly by one run and wrongly by the other."""

    doc_id: Count
    change: Annotated[
        Literal["lost", "gained"],
        Meta(
            description="lost: right in the baseline, wrong in the candidate; gained: the reverse"
        ),
    ]
    question: str
    target: str
    baseline_answer: str
    candidate_answer: str


class FilterComparison(msgspec.Struct, frozen=True):
    """One filter's paired table, statistics and finding."""

    filter: str
    counts: PairedCounts
    finding: Finding
    p_value: float
    interval: tuple[float, float]
    reason: str
    questions_to_settle: int | None
    flips: tuple[Flip, ...]
    """Every flip: the lost ones first, each group by doc_id."""
    design_effect: float = 1.0
    """The variance inflation of clustering a question's repeats (1 without repeats)."""


class RunInfo(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Which run a side of the comparison is."""

    path: str
    run_id: str
    model: str | None
    status: str
    labels: Annotated[dict[str, Any], Meta(description="result.json's labels, as recorded")]


class Comparison(msgspec.Struct, frozen=True):
    """The answer of `evalgate compare`: the finding, and everything a reader needs to trust it."""

    baseline: RunInfo
    candidate: RunInfo
    max_drop: float
    finding: Finding
    reason: str
    filters: tuple[FilterComparison, ...]
    drift: tuple[Difference, ...]
    """Protocol differences let through by allow_protocol_drift (empty otherwise)."""
    changed: tuple[Difference, ...]
    """Labels and model that differ: what the user changed."""
    failed: dict[str, tuple[int, ...]]
    """doc_ids left out because their request failed, per side."""
    unpaired: tuple[int, ...]
    """Shared doc_ids left out because their question differs (only under drift)."""
    warnings: tuple[str, ...]

    @property
    def exit_code(self) -> ExitCode:
        """0 equivalent, 1 regression, 5 inconclusive."""
        return self.finding.exit_code


def _compare_filter(
    name: str, baseline: Run, candidate: Run, doc_ids: Sequence[int], max_drop: float
) -> FilterComparison:
    cells = {(True, True): 0, (True, False): 0, (False, True): 0, (False, False): 0}
    flips: list[Flip] = []
    questions: dict[int, list[int]] = {}  # cluster -> [answers, lost, gained]
    repeated = False
    for doc_id in doc_ids:
        was, now = baseline.samples[doc_id], candidate.samples[doc_id]
        if name not in was.filters or name not in now.filters:
            continue
        right = (was.filters[name].correct, now.filters[name].correct)
        cells[right] += 1
        repeated = repeated or was.repeat is not None
        tally = questions.setdefault(doc_id if was.cluster is None else was.cluster, [0, 0, 0])
        tally[0] += 1
        if right[0] != right[1]:
            change: Literal["lost", "gained"] = "lost" if right[0] else "gained"
            tally[1 if right[0] else 2] += 1
            answers = (was.filters[name].extracted, now.filters[name].extracted)
            flips.append(Flip(doc_id, change, was.question, was.target, *answers))
    clusters = tuple(Cluster(*tally) for tally in questions.values()) if repeated else ()
    counts = PairedCounts(
        cells[True, True], cells[True, False], cells[False, True], cells[False, False], clusters
    )
    classified = classify(counts, max_drop)
    needed = (
        questions_to_settle(counts, max_drop) if classified[0] is Finding.INCONCLUSIVE else None
    )
    flips.sort(key=lambda f: (f.change != "lost", f.doc_id))
    reason = filter_reason(counts, classified, max_drop, needed, baseline)
    return FilterComparison(
        name, counts, *classified, reason, needed, tuple(flips), design_effect(counts)
    )


def _info(run: Run) -> RunInfo:
    r = run.result
    return RunInfo(str(run.path.parent), r.run_id, r.model, r.status, to_document(r.labels))


def _changed(baseline: Run, candidate: Run) -> tuple[Difference, ...]:
    before = {"model": baseline.result.model, **to_document(baseline.result.labels)}
    after = {"model": candidate.result.model, **to_document(candidate.result.labels)}
    return tuple(
        Difference(key, str(before.get(key)), str(after.get(key)))
        for key in dict.fromkeys([*before, *after])
        if before.get(key) != after.get(key)
    )


EVALUATED = ("gate", "artifacts", "done")
"""The stages after the eval: a run that reached one holds every answer its eval asked for,
whatever its status (`run --baseline` compares itself at "gate", before its verdict)."""


def _warnings(baseline: Run, candidate: Run, failed: dict[str, tuple[int, ...]]) -> list[str]:
    found = [
        f"the {side} run ended with status {run.result.status}: its samples may be incomplete"
        for side, run in (("baseline", baseline), ("candidate", candidate))
        if run.result.status not in ("pass", "fail", "inconclusive")
        and run.result.stage not in EVALUATED
    ]
    models = [run.result.model for run in (baseline, candidate)]
    if models[0] != models[1]:
        found.append(
            f"the runs are of different models ({models[0]} vs {models[1]}): the difference "
            "measures the model change too"
        )
    versions = [run.eval.lm_eval_version for run in (baseline, candidate)]
    if versions[0] != versions[1]:
        found.append(
            f"lm_eval_version differs ({versions[0]} vs {versions[1]}): scoring code "
            "may differ between the runs"
        )
    for side, run in (("baseline", baseline), ("candidate", candidate)):
        texts = [s.question for s in run.samples.values() if s.repeat is None]
        repeated = len(texts) - len(set(texts))
        if repeated and all(s.repeat is None for s in run.samples.values()):
            found.append(
                f"the {side} run asks {repeated} question(s) more than once but its samples "
                "do not record the repeats (samples.jsonl's cluster and repeat, which older "
                "versions of evalgate did not write): its answers are counted as independent, "
                "which overstates the evidence; rerun it to have the repeats clustered"
            )
    found += [
        f"questions left out because their request failed in the {side} run: {len(ids)} "
        f"({format_doc_ids(ids)})"
        for side, ids in failed.items()
        if ids
    ]
    return found


def stopped_early(side: str, run: Run) -> str | None:
    """Why a run that stopped early (--early-stop) cannot be paired, or None: it answered only
    the questions that made its own verdict certain, and pairing those would bias the
    comparison."""
    record = run.eval.early_stop
    if record is None or not record.stopped:
        return None
    return (
        f"The {side} run {run.path.parent} stopped early (--early-stop {record.mode}) after "
        f"{record.questions_used} of {record.questions} questions, where its own answers made "
        "its verdict certain: it is incomplete, and pairing the questions it chose would bias "
        "the comparison"
    )


def _refuse(baseline: Run, candidate: Run, max_drop: float, allow_drift: bool) -> list[Difference]:
    """Raise UsageError for two runs that cannot be compared; the protocol differences that
    allow_drift lets through."""
    refused = not_a_margin(max_drop)
    if refused is not None:
        raise UsageError(refused)
    if baseline.result.run_id == candidate.result.run_id:  # a run's identity: run_identity
        raise UsageError(
            f"Both arguments are the same run (run_id {baseline.result.run_id}: "
            f"{baseline.path.parent} and {candidate.path.parent}): a run always equals itself. "
            "Pass the baseline run's folder first and the candidate's second."
        )
    for side, run in (("baseline", baseline), ("candidate", candidate)):
        stopped = stopped_early(side, run)
        if stopped is not None:
            raise UsageError(f"{stopped}. Compare runs made with --early-stop off.")
    drift = protocol_differences(baseline, candidate)
    if drift and not allow_drift:
        raise UsageError(
            f"The runs {baseline.path.parent} and {candidate.path.parent} were not measured the "
            "same way, so a difference in score could come from the protocol rather than the "
            "change: " + "; ".join(d.describe() for d in drift) + ". Rerun one with the "
            "other's settings, or pass --allow-protocol-drift to compare them anyway."
        )
    return drift


def compare_runs(
    baseline: Run | Path,
    candidate: Run | Path,
    *,
    max_drop: float = DEFAULT_MAX_DROP,
    allow_protocol_drift: bool = False,
) -> Comparison:
    """Pair two runs (loaded, or their folders or result.json files) and decide. Raises
    UsageError when they cannot be compared (their protocols differ, ...)."""
    baseline = baseline if isinstance(baseline, Run) else load_run(baseline)
    candidate = candidate if isinstance(candidate, Run) else load_run(candidate)
    drift = _refuse(baseline, candidate, max_drop, allow_protocol_drift)
    shared = sorted(set(baseline.samples) & set(candidate.samples))
    failed = {
        side: tuple(i for i in shared if run.samples[i].error is not None)
        for side, run in (("baseline", baseline), ("candidate", candidate))
    }
    asked = operator.attrgetter("question", "cluster", "repeat")  # the same repeat of it too
    unpaired = tuple(i for i in shared if asked(baseline.samples[i]) != asked(candidate.samples[i]))
    skip = {*failed["baseline"], *failed["candidate"], *unpaired}
    names = [f for f in baseline.filters if f in candidate.filters]
    paired = [i for i in shared if i not in skip]
    results = tuple(_compare_filter(name, baseline, candidate, paired, max_drop) for name in names)
    if not results:
        raise UsageError(
            f"The runs {baseline.path.parent} and {candidate.path.parent} share no scored "
            "filter: there is nothing to compare. Compare two runs of the same task."
        )
    finding = max((r.finding for r in results), key=lambda f: f.rank)
    reason = "; ".join(f"{r.filter}: {r.reason}" for r in results if r.finding is finding)
    return Comparison(
        baseline=_info(baseline),
        candidate=_info(candidate),
        max_drop=max_drop,
        finding=finding,
        reason=reason,
        filters=results,
        drift=tuple(drift),
        changed=_changed(baseline, candidate),
        failed=failed,
        unpaired=unpaired,
        warnings=tuple(_warnings(baseline, candidate, failed)),
    )
