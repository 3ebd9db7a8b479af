"""A thresholds file fitted from recorded runs (docs/history.md, "Fitted floors"): a floor per
model and task, an override where a hardware, framework, precision or KV-cache dtype group's
runs differ from the model's others, and a summary of each floor against the file in use.

The runs given are the completed ones not marked bad, passing or failing alike: fitting only
from passes cuts the lower tail and ratchets the floor up at every refit. Pure: runs and the
file in use in, the document and its summary out; the command writes it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from evalgate.errors import ThresholdsError
from evalgate.rules.floors import (
    DEFAULT_POLICY,
    MIN_RUNS,
    TAIL,
    Counts,
    Fit,
    Policy,
    TooThin,
    fit_floor,
    fitted_mean,
    t_quantile,
)
from evalgate.thresholds import Thresholds, parse_thresholds, resolve_floor

GROUP_LABELS = ("hardware", "framework", "precision", "kv_cache_dtype")
"""The labels whose values make a group of a model's runs that may earn its own override."""
DIFFER = 0.01
"""Two-sided level at which a group's mean score is told apart from the model's other runs'."""


@dataclass(frozen=True)
class RecordedRun:
    """One completed run, not marked bad, as a history holds it: its labels, its task, and per
    filter of the gated metric, its right answers and questions."""

    task: str
    scores: dict[str, Counts]
    model: str | None = None
    model_prefix: str | None = None
    hardware: str | None = None
    framework: str | None = None
    precision: str | None = None
    kv_cache_dtype: str | None = None

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
