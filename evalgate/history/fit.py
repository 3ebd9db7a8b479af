"""A thresholds file fitted from recorded runs (docs/history.md, "Fitted floors"): a floor per
model and task from its past runs, by one of two policies; an override where a hardware,
framework, precision or KV-cache dtype group's runs differ from the model's others; and a summary
of each floor against the file in use. Pure: runs and the file in use in, the document and its
summary out; the command writes it.

`beta-binomial` (the default): a run's score is its right answers of n questions; the runs'
own accuracies vary around the config's mean beyond binomial noise (a beta-binomial: mean mu,
overdispersion rho, both fitted by the method of moments from each run's right answers and
question count). The floor is the lower `tail` prediction bound for the next run's score: an
unchanged config falls below it in at most `tail` of its runs. The bound takes the next run's
own question count, the uncertainty of the fitted mean, and that of the fitted spread (the
variance widened by Student's t over the normal quantile, with runs - 1 degrees of freedom);
its shape is the beta-binomial's own, skewed as scores near 1 are. Fewer than MIN_RUNS runs:
too thin to fit.

`ix`: the InferenceX harness's rule exactly (its PR #1721): over the runs' scores,
floor = max(0.90, Q1 - 1.5 IQR - 0.02 rounded down to two decimals). The PR does not name its
quartile method; these are numpy's default, linear interpolation between order statistics
(`statistics.quantiles`'s inclusive method). Its 0.90 is the harness's GSM8K default;
`lowest` carries it.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, ClassVar

from evalgate.errors import ThresholdsError
from evalgate.evidence.model import ConfigLabels
from evalgate.settings.output import Policy
from evalgate.thresholds import Thresholds, parse_thresholds, resolve_floor

DEFAULT_POLICY: Policy = "beta-binomial"
MIN_RUNS = 5
"""Fewer runs than this are too thin to fit: the spread between runs is then estimated from
fewer than 4 degrees of freedom, and the bound it gives is too loose to gate anything."""
TAIL = 0.01
"""The share of an unchanged config's runs the beta-binomial floor may fail."""
IX_LOWEST = 0.90
"""The harness's floor under every fitted floor (its GSM8K default)."""

Counts = tuple[int, int]
"""One run's score of one filter: (right answers, questions)."""


class Described:
    """A fit that describes itself in the summary: its class's `text`, formatted with it."""

    text: ClassVar[str]

    def describe(self) -> str:
        return self.text.format(fit=self)


@dataclass(frozen=True)
class BetaBinomialFit(Described):
    """A floor by the beta-binomial policy, and the numbers behind it."""

    floor: float
    """The bound, rounded down to four decimals (never stricter than the bound)."""
    runs: int
    questions: int
    """The next run's question count the bound is for (the most any run asked)."""
    mean: float
    """The runs' pooled accuracy: right answers over questions."""
    rho: float
    """Overdispersion: a run of n questions varies by binomial noise times 1 + rho (n - 1)
    (0: the runs differ no more than binomial noise)."""
    spread: float
    """Standard deviation of the next run's score, the fit's own uncertainty included."""
    tail: float
    text = (
        "beta-binomial: {fit.runs} runs, mean {fit.mean:.4f}, overdispersion {fit.rho:.2e}, next "
        "run of {fit.questions} questions: sd {fit.spread:.4f}, {fit.tail:.2%} lower bound "
        "{fit.floor:.4f}"
    )


@dataclass(frozen=True)
class IxFit(Described):
    """A floor by the harness's rule, and the numbers behind it."""

    floor: float
    runs: int
    q1: float
    q3: float
    fence: float
    """Q1 - 1.5 IQR, the box plot's lower whisker."""
    lowest: float
    text = (
        "ix: {fit.runs} runs, Q1 {fit.q1:.4f}, IQR {fit.iqr:.4f}, low fence {fit.fence:.4f}, "
        "floor max({fit.lowest:g}, fence - 0.02 to 2 decimals) = {fit.floor:.2f}"
    )

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1


@dataclass(frozen=True)
class TooThin(Described):
    """Too few runs to fit a floor."""

    runs: int
    need: int = MIN_RUNS
    text = "too thin to fit: {fit.runs} runs, need {fit.need}"


Fit = BetaBinomialFit | IxFit


def fit_floor(
    runs: Sequence[Counts],
    policy: Policy = DEFAULT_POLICY,
    *,
    tail: float = TAIL,
    lowest: float = IX_LOWEST,
) -> Fit | TooThin:
    """The floor for a config's next run from its past runs (right answers, questions), by
    `policy` (`tail` is the beta-binomial's, `lowest` the ix rule's floor under every floor)."""
    if bad := next(((r, n) for r, n in runs if not 0 <= r <= n), None):
        raise ValueError(f"a run's right answers must lie in 0..questions, not {bad}")
    usable = [(right, n) for right, n in runs if n > 0]
    if len(usable) < MIN_RUNS:
        return TooThin(len(usable))
    if policy == "ix":
        return ix_floor([right / n for right, n in usable], lowest)
    return beta_binomial_floor(usable, tail)


def ix_floor(scores: Sequence[float], lowest: float = IX_LOWEST) -> IxFit:
    """The harness's rule: max(lowest, Q1 - 1.5 IQR - 0.02 rounded down to two decimals)."""
    q1, _, q3 = statistics.quantiles(scores, n=4, method="inclusive")
    fence = q1 - 1.5 * (q3 - q1)
    # round() first: 0.93 - 0.02 is 0.9099999..., which is 0.91 to the harness's eye too
    fitted = math.floor(round((fence - 0.02) * 100, 9)) / 100
    return IxFit(max(lowest, fitted), len(scores), q1, q3, fence, lowest)


def fitted_mean(runs: Sequence[Counts]) -> tuple[float, float, float]:
    """(mean, rho, standard error of the mean) of the runs' beta-binomial fit, by moments."""
    k = len(runs)
    total = sum(n for _, n in runs)
    squares = sum(n * n for _, n in runs)
    mean = sum(right for right, _ in runs) / total
    base = _variance_base(runs)
    # E[sum n_i (s_i - mean)^2] = mu(1-mu) [(k - 1) + rho (N - sum n_i^2 / N - (k - 1))]
    excess = total - squares / total - (k - 1)
    rho = 0.0
    if k > 1 and excess > 0:  # else every run asked one question: no spread to see beyond it
        spread = sum(n * (right / n - mean) ** 2 for right, n in runs)
        rho = min(max((spread / base - (k - 1)) / excess, 0.0), 1 - 1e-9)
    # Var(mean) = mu(1-mu) sum n_i (1 + rho (n_i - 1)) / N^2
    error = math.sqrt(base * (total + rho * (squares - total)) / total**2)
    return mean, rho, error


def beta_binomial_floor(runs: Sequence[Counts], tail: float = TAIL) -> BetaBinomialFit:
    """The lower `tail` prediction bound for the next run's score (module docstring)."""
    mean, rho, error = fitted_mean(runs)
    questions = max(n for _, n in runs)
    # The next run's score varies by its own beta-binomial variance, and the fitted mean by
    # its own error.
    next_run = _variance_base(runs) * (1 + rho * (questions - 1)) / questions
    widen = t_quantile(1 - tail, len(runs) - 1) / statistics.NormalDist().inv_cdf(1 - tail)
    variance = (next_run + error**2) * widen**2
    right = lower_quantile(questions, mean, variance, tail)
    floor = right * 10_000 // questions / 10_000  # four decimals, rounded down, exactly
    return BetaBinomialFit(floor, len(runs), questions, mean, rho, math.sqrt(variance), tail)


def _variance_base(runs: Sequence[Counts]) -> float:
    """mu(1 - mu) for the variances: mu kept off 0 and 1 by half a question (Jeffreys), so
    that runs all right, or all wrong, still leave room for one answer to differ."""
    total = sum(n for _, n in runs)
    mu = (sum(right for right, _ in runs) + 0.5) / (total + 1)
    return mu * (1 - mu)


def lower_quantile(n: int, mean: float, variance: float, tail: float) -> int:
    """The most right answers c of n such that a beta-binomial run with this mean and score
    variance falls below c with probability at most `tail`: P(X < c) <= tail."""
    first, weights = beta_binomial_weights(n, mean, variance)
    upto = itertools.accumulate(weights)  # P(X <= first + offset)
    return next((first + offset for offset, p in enumerate(upto) if p > tail), n)


def beta_binomial_weights(n: int, mean: float, variance: float) -> tuple[int, list[float]]:
    """(first, weights): P(X = first + i) for the beta-binomial over n questions with this mean
    accuracy and this variance of the score X/n (binomial, to 1e-12, where the variance is no
    larger than binomial); 0 for the x left out. From the mode outwards by the ratio of
    neighbouring terms, P(x + 1) / P(x) = (n - x)(x + a) / ((x + 1)(n - x - 1 + b)), then
    normalised: no huge binomial coefficients, no log-gamma of huge parameters."""
    mean = min(max(mean, 0.5 / (n + 1)), 1 - 0.5 / (n + 1))
    rho = (variance * n / (mean * (1 - mean)) - 1) / (n - 1) if n > 1 else 0.0
    rho = min(max(rho, 1e-15), 1 - 1e-9)
    a, b = mean * (1 - rho) / rho, (1 - mean) * (1 - rho) / rho
    # Down and up from the mode until a term is below 1e-16 of the mode's: the rest of that
    # tail weighs less than a float can add to the sum.
    mode = min(n, max(0, round(mean * n)))
    below, above = [1.0], [1.0]
    for terms, xs in ((below, range(mode - 1, -1, -1)), (above, range(mode, n))):
        for x in xs:
            forth, back = (n - x) * (x + a), (x + 1) * (n - x - 1 + b)  # P(x + 1) / P(x)
            terms.append(terms[-1] * (back / forth if terms is below else forth / back))
            if terms[-1] < 1e-16:
                break
    weights = below[:0:-1] + above
    total = math.fsum(weights)
    return mode - len(below) + 1, [w / total for w in weights]


@cache
def t_quantile(p: float, df: int) -> float:
    """Student's t quantile for a whole number of degrees of freedom (p in (0.5, 1)), by
    bisection on its distribution function."""
    low, high = 0.0, 1.0
    while t_cdf(high, df) < p:
        low, high = high, high * 2
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (middle, high) if t_cdf(middle, df) < p else (low, middle)
    return (low + high) / 2


def t_cdf(t: float, df: int) -> float:
    """Student's t distribution function at t >= 0 for a whole number of degrees of freedom,
    by its closed form (Abramowitz and Stegun 26.7.3 and 26.7.4)."""
    theta = math.atan(t / math.sqrt(df))
    c, s = math.cos(theta), math.sin(theta)
    odd = df % 2 == 1
    term = c if odd else 1.0
    total = 0.0 if df == 1 else term
    for k in range(3 if odd else 2, df - 1, 2):
        term *= (k - 1) / k * c * c
        total += term
    both = 2 / math.pi * (theta + s * total) if odd else s * total
    return 0.5 + both / 2


# The file. The runs given are the completed ones not marked bad, passing or failing alike:
# fitting only from passes cuts the lower tail and ratchets the floor up at every refit.

GROUP_LABELS = ("hardware", "framework", "precision", "kv_cache_dtype")
"""The labels whose values make a group of a model's runs that may earn its own override."""
DIFFER = 0.01
"""Two-sided level at which a group's mean score is told apart from the model's other runs'."""


class RecordedRun(ConfigLabels, frozen=True, kw_only=False):
    """One completed run, not marked bad, as a history holds it: its labels, its task, and per
    filter of the gated metric, its right answers and questions."""

    task: str
    scores: dict[str, Counts]
    model: str | None = None

    @property
    def key(self) -> tuple[str, str] | None:
        """(label, value) of the model key the thresholds use: the model_prefix label, else
        the model (as verify's page groups runs)."""
        if self.model_prefix:
            return "model_prefix", self.model_prefix
        return ("model", self.model) if self.model else None

    @property
    def group(self) -> tuple[tuple[str, str], ...]:
        return tuple((k, v) for k in GROUP_LABELS if (v := getattr(self, k)))


@dataclass(frozen=True)
class FloorChange:
    """One floor of the fitted file beside the file in use's."""

    model: str
    task: str
    match: dict[str, str]
    """What the floor matches: the model key alone (the model's floor) or with a group's labels
    (an override)."""
    fit: Fit | TooThin
    before: float | None
    """The floor the file in use gives these runs (None: it has none for the task)."""
    before_from: str
    after: float | None
    """The floor the fitted file gives these runs (an override kept from the file in use may
    give them another than the one fitted)."""
    after_from: str
    note: str = ""

    def line(self) -> str:
        """One line of the summary: what, how many runs, old -> new, and the fit."""
        where = ", ".join(f"{k}={v}" for k, v in self.match.items())
        old = "none" if self.before is None else f"{self.before:.4f} ({self.before_from})"
        new = "none" if self.after is None else f"{self.after:.4f} ({self.after_from})"
        text = f"{where} {self.task}: {old} -> {new}; {self.fit.describe()}"
        return text + (f"; {self.note}" if self.note else "")


@dataclass(frozen=True)
class FittedThresholds:
    """The fitted thresholds document (what --thresholds reads) and its summary."""

    document: dict[str, Any]
    changes: list[FloorChange]
    unkeyed: int = 0
    """Runs with neither a model nor a model_prefix label: no floor can name them."""


def fit_runs(
    runs: Sequence[RecordedRun], policy: Policy, tail: float, lowest: float
) -> Fit | TooThin:
    """One floor for runs of one task: fitted per filter every run has, the lowest of them
    (every filter must clear it). The beta-binomial's tail is shared among the filters, so an
    unchanged config still fails at most `tail` of its runs."""
    filters = sorted(set.intersection(*(set(r.scores) for r in runs))) if runs else []
    if not filters:
        return TooThin(0)
    fits = [
        fit_floor([r.scores[f] for r in runs], policy, tail=tail / len(filters), lowest=lowest)
        for f in filters
    ]
    fitted = [f for f in fits if not isinstance(f, TooThin)]
    if len(fitted) < len(fits):
        return next(f for f in fits if isinstance(f, TooThin))
    return min(fitted, key=lambda f: f.floor)


def differ(group: Sequence[RecordedRun], rest: Sequence[RecordedRun]) -> bool:
    """Whether a group's mean score differs from the rest's on any filter both have, beyond
    what their beta-binomial fits allow (two-sided, at DIFFER, Student's t with the smaller
    side's runs - 1 degrees of freedom)."""
    if len(group) < 2 or len(rest) < 2:
        return False
    both = set.intersection(*(set(r.scores) for r in [*group, *rest]))
    limit = t_quantile(1 - DIFFER / 2 / max(len(both), 1), min(len(group), len(rest)) - 1)
    for name in both:
        mean, _, error = fitted_mean([r.scores[name] for r in group])
        other, _, other_error = fitted_mean([r.scores[name] for r in rest])
        if abs(mean - other) > limit * (error**2 + other_error**2) ** 0.5:
            return True
    return False


Planned = tuple[dict[str, str], str, Fit | TooThin, str]
"""A floor to write: what it matches, its task, its fit, a note for the summary."""


def fit_model(
    match: dict[str, str],
    task: str,
    runs: Sequence[RecordedRun],
    *,
    policy: Policy,
    tail: float,
    lowest: float,
) -> list[Planned]:
    """The floors of one model's task: an override for each group whose runs differ from the
    model's others, then the model's own floor from all its runs (so it covers a config not
    yet seen)."""
    groups: dict[tuple[tuple[str, str], ...], list[RecordedRun]] = defaultdict(list)
    for run in runs:
        groups[run.group].append(run)
    planned: list[Planned] = []
    for group, group_runs in sorted(groups.items()) if len(groups) > 1 else ():
        rest = [r for r in runs if r.group != group]
        if group and len(group_runs) >= MIN_RUNS and differ(group_runs, rest):
            fit = fit_runs(group_runs, policy, tail, lowest)
            planned.append(
                ({**match, **dict(group)}, task, fit, "its runs differ from the model's others")
            )
    fit = fit_runs(runs, policy, tail, lowest)
    note = f"{len(groups)} groups of runs, {len(planned)} with a floor of their own"
    if isinstance(fit, TooThin):
        note = "the floor in use is kept"
    return [*planned, (match, task, fit, note)]


def fit_thresholds(
    runs: Iterable[RecordedRun],
    in_use: Thresholds,
    policy: Policy = DEFAULT_POLICY,
    tail: float = TAIL,
) -> FittedThresholds:
    """The thresholds file fitted from `runs` by `policy`: the file in use's, with the floors
    fit_model gives each model and task the runs hold enough of. A model too thin to fit keeps
    the floor it had; the file in use's overrides are kept, save those refitted."""
    by_model: dict[tuple[tuple[str, str], str], list[RecordedRun]] = defaultdict(list)
    unkeyed = 0
    for run in runs:
        if run.key is None:
            unkeyed += 1
        else:
            by_model[run.key, run.task].append(run)
    planned = [
        entry
        for ((label, key), task), model_runs in sorted(by_model.items())
        for entry in fit_model(
            {label: key},
            task,
            model_runs,
            policy=policy,
            tail=tail,
            lowest=in_use.file.default.get(task, 0.0),
        )
    ]
    document = _document(in_use, planned)
    fitted = parse_thresholds(document, "the fitted thresholds")
    changes = [
        FloorChange(
            match.get("model_prefix") or match["model"],
            task,
            match,
            fit,
            *_floor(in_use, match, task),
            *_floor(fitted, match, task),
            note,
        )
        for match, task, fit, note in planned
    ]
    return FittedThresholds(document, changes, unkeyed)


def _document(in_use: Thresholds, planned: Iterable[Planned]) -> dict[str, Any]:
    """The file in use with the planned floors written in: a model's floor in its models
    entry, a group's as an override (a floor of 0 gates nothing: left out)."""
    models = {name: dict(floors) for name, floors in in_use.file.models.items()}
    overrides: list[dict[str, Any]] = []
    for match, task, fit, _ in planned:
        if isinstance(fit, TooThin) or fit.floor <= 0:
            continue
        if len(match) == 1:
            models.setdefault(next(iter(match.values())), {})[task] = fit.floor
        else:
            why = f"fitted: {fit.describe()}"
            overrides.append({"match": match, "thresholds": {task: fit.floor}, "why": why})
    # The file in use's overrides stay, less the tasks refitted for the same match.
    refitted = [(o["match"], task) for o in overrides for task in o["thresholds"]]
    kept = []
    for old in in_use.file.overrides:
        floors = {t: v for t, v in old.thresholds.items() if (dict(old.match), t) not in refitted}
        if floors:
            kept.append({"match": dict(old.match), "thresholds": floors, "why": old.why})
    return {
        **({"$schema": in_use.file.schema} if in_use.file.schema else {}),
        "default": dict(in_use.file.default),
        "models": {name: floors for name, floors in sorted(models.items()) if floors},
        "overrides": kept + overrides,
    }


def _floor(thresholds: Thresholds, match: dict[str, str], task: str) -> tuple[float | None, str]:
    """The floor a run with exactly these labels gets, and the entry that gives it."""
    try:
        floor = resolve_floor(thresholds, match.get("model"), match, task)
    except ThresholdsError:
        return None, "no floor for the task"
    return floor.value, floor.matched


def summary(fitted: FittedThresholds) -> list[str]:
    """The fit's summary, a line per floor, the floors changed most first."""

    def moved(change: FloorChange) -> float:
        if change.before is None or change.after is None:
            return 1.0
        return abs(change.after - change.before)

    lines = [c.line() for c in sorted(fitted.changes, key=moved, reverse=True)]
    if fitted.unkeyed:
        lines.append(
            f"{fitted.unkeyed} runs have neither a model nor a model_prefix label: left out"
        )
    return lines
