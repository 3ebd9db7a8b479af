"""A filter's finding in words: its paired table, the margin, and what would settle it.

Questions to settle an INCONCLUSIVE (an estimate): keep the four cells' proportions and grow n
until compare's rule (compare.paired) would decide: when d > -m/2, until the interval's lower
end passes -m (EQUIVALENT); when d < -m/2, until the exact test on the rescaled (rounded)
discordant counts gives p < 0.05 (REGRESSION). It assumes the proportions hold, which they need
not. When questions repeat, the estimate is made on the counts divided by the design effect,
then converted back to questions (clusters).
"""

from __future__ import annotations

import math

import msgspec

from evalgate.compare.paired import (
    ALPHA,
    Finding,
    PairedCounts,
    design_effect,
    mcnemar_exact_p,
    practical_drop,
    score_interval,
)
from evalgate.compare.runs import Run
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
