"""Did a change cost accuracy? Two runs over the same questions, paired per filter (compare_runs:
both runs loaded, one stopped early or measured another way refused, the answers paired per
(question, repeat), each filter classified, the worst deciding; what each step means and why:
docs/compare.md); and each filter's finding in words: its paired table, the margin, and what
would settle it.

Questions to settle an INCONCLUSIVE (an estimate): keep the four cells' proportions and grow n
until compare's rule (compare/paired.py) would decide: when d > -m/2, until the interval's lower
end passes -m (EQUIVALENT); when d < -m/2, until the exact test on the rescaled (rounded)
discordant counts gives p < 0.05 (REGRESSION). It assumes the proportions hold, which they need
not. When questions repeat, the estimate is made on the counts divided by the design effect,
then converted back to questions (clusters).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from evalgate.compare.paired import (
    ALPHA,
    Cluster,
    Finding,
    PairedCounts,
    classify,
    design_effect,
    mcnemar_exact_p,
    practical_drop,
    score_interval,
)
from evalgate.compare.runs import Difference, Run, format_doc_ids, load_run, protocol_differences
from evalgate.environment import DEFAULT_MAX_DROP, not_a_margin
from evalgate.errors import ExitCode, UsageError
from evalgate.evidence.model import Count, to_document
from evalgate.tasks.dataset import GSM8K_TEST_SIZE, known_name


def points(fraction: float) -> str:
    """A difference as signed percentage points: -0.0265 -> '-2.65'."""
    return f"{fraction * 100:+.2f}"


def p_text(p_value: float) -> str:
    """A p-value for people: '1.0', '0.032', '7.9e-08'."""
    if p_value >= 0.9995:
        return "1.0"
    return f"{p_value:.3f}" if p_value >= 0.001 else f"{p_value:.1e}"


def filter_reason(
    counts: PairedCounts,
    classified: tuple[Finding, float, tuple[float, float]],
    max_drop: float,
    needed: int | None,
    baseline: Run,
) -> str:
    """Why one filter's finding (`classified`: paired.classify's) is what it is: its table, its
    test and interval against the margin, and for an INCONCLUSIVE what would settle it (`needed`
    questions)."""
    finding, p_value, interval = classified
    if counts.n == 0:
        return "no question was answered in both runs"
    estimate = (
        f"{points(counts.difference)} points, 95% CI [{points(interval[0])}, {points(interval[1])}]"
    )
    table = f"{counts.lost} lost, {counts.gained} gained: {estimate}, McNemar p = {p_text(p_value)}"
    if counts.clustered:
        table = (
            f"{counts.lost} answers lost, {counts.gained} gained, of {counts.n} answers to "
            f"{counts.questions} questions: {estimate}, clustered McNemar p = {p_text(p_value)} "
            f"(each question's repeats one cluster, design effect {design_effect(counts):.2f})"
        )
    margin = f"{max_drop * 100:.1f}-point margin"
    if finding is Finding.REGRESSION:
        if counts.difference < -max_drop:
            return f"{table}: a significant drop beyond the {margin}"
        return f"{table}: a significant drop of at least half the {margin}"
    if finding is Finding.IMPROVED:
        return f"{table}: a significant gain of at least half the {margin}"
    if finding is Finding.EQUIVALENT:
        better = p_value < ALPHA and counts.difference > 0
        return f"{table}: any drop is within the {margin}" + (
            "; the candidate is significantly better" if better else ""
        )
    if counts.difference < -practical_drop(max_drop):
        why = f"the drop reaches half the {margin} but is not significant"
    else:
        why = f"a drop beyond the {margin} cannot be ruled out"
    return f"{table}: {why}{_advice(needed, counts, baseline)}"


SETTLE_CAP = 10_000_000
"""Beyond this many questions the estimate is reported as out of reach."""
EXACT_LIMIT = 5_000
"""Discordant pairs beyond which the estimate uses the score interval for the test (speed)."""


def _settled(gained: float, lost: float, n: float, size: int, max_drop: float) -> bool:
    """Would the rule decide with `size` questions in the same proportions?"""
    scale = size / n
    if (gained - lost) / n > -practical_drop(max_drop):
        return score_interval(gained * scale, lost * scale, size)[0] > -max_drop
    lost_at, gained_at = round(lost * scale), round(gained * scale)
    if lost_at + gained_at > EXACT_LIMIT:  # the score interval and the exact test agree by then
        return score_interval(gained_at, lost_at, size)[1] < 0
    return mcnemar_exact_p(lost_at, gained_at) < ALPHA


def questions_to_settle(counts: PairedCounts, max_drop: float) -> int | None:
    """About how many paired questions (not answers), at the observed proportions, the rule
    needs to decide; None when nothing is paired, when the drop sits exactly at half the margin
    (neither side can be reached), or beyond SETTLE_CAP."""
    if counts.n == 0 or math.isclose(counts.difference, -practical_drop(max_drop), abs_tol=1e-12):
        return None
    effect = design_effect(counts)
    gained, lost, n = counts.gained / effect, counts.lost / effect, counts.n / effect
    low = max(1, math.floor(n))
    high = 2 * low
    while not _settled(gained, lost, n, high, max_drop):
        if high > SETTLE_CAP:
            return None
        low, high = high, 2 * high
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if _settled(gained, lost, n, middle, max_drop) else (middle, high)
    return math.ceil(high * effect * counts.questions / counts.n)  # answers back to questions


def _whole_set(run: Run) -> tuple[str, int] | None:
    """The task and how many questions it has, when the run shows it: a run without --limit
    asked them all (for GSM8K the count is known anyway)."""
    record = run.eval
    task = known_name(record.task)
    if task.startswith("gsm8k") and record.limit is not None:
        return task, GSM8K_TEST_SIZE
    if record.limit is not None or isinstance(record.questions, msgspec.UnsetType):
        return None
    return task, record.questions


def _advice(needed: int | None, counts: PairedCounts, baseline: Run) -> str:
    """What would settle an INCONCLUSIVE, said after its reason: comparing `needed` questions,
    or nothing a rerun can do when that is more than the task has."""
    if needed is None:
        return "; no number of questions would settle it at these rates"
    text = f"; about {needed} paired questions would settle it at these rates (an estimate)"
    # A task that repeats its questions counts answers, not questions: its size is unknown.
    whole = None if counts.clustered else _whole_set(baseline)
    if whole is not None and needed > whole[1]:
        return (
            f"{text}, more than the {whole[1]} questions {whole[0]} has: no rerun can settle "
            "it. Widen --max-drop or accept the uncertainty"
        )
    return (
        f"{text}: compare runs of at least {needed} questions"
        if needed > counts.questions
        else text
    )


# The comparison.


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


def stopped_early(baseline: Run, candidate: Run) -> str | None:
    """Why two runs cannot be paired when one stopped early (--early-stop), or None: it
    answered only the questions that made its own verdict certain, and pairing those would
    bias the comparison."""
    for side, run in (("baseline", baseline), ("candidate", candidate)):
        record = run.eval.early_stop
        if record is not None and record.stopped:
            return (
                f"The {side} run {run.path.parent} stopped early (--early-stop {record.mode}) "
                f"after {record.questions_used} of {record.questions} questions, where its own "
                "answers made its verdict certain: it is incomplete, and pairing the questions "
                "it chose would bias the comparison"
            )
    return None


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
    stopped = stopped_early(baseline, candidate)
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
