"""The history read back: each config's runs in time order (the `history` command's table, its
--json document and its --html trend page), the baseline a sweep is paired with, and the
completed runs a fit takes.

A run or sweep marked bad is shown, with who marked it, when and why, and left out of baselines
and fits (record.mark).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import msgspec

from evalgate import templates
from evalgate.compare.runs import Run
from evalgate.errors import UsageError
from evalgate.evidence.model import Labels
from evalgate.evidence.outputs import run_identity
from evalgate.history.record import (
    RUN_COLUMNS,
    Mark,
    StoredRun,
    StoredScore,
    config_of,
    digested,
    stored_run,
)
from evalgate.history.store import Store
from evalgate.verify.baseline import HistoryBaseline, load_entry
from evalgate.verify.records import Collection, Entry

DOCUMENT_SCHEMA = "evalgate.history/1"
DROPPED = frozenset({"fail", "regression", "error", "malformed"})


class ConfigHistory(msgspec.Struct, frozen=True):
    """One config's labels (task and model among them) and its runs in time order."""

    name: str
    labels: dict[str, Any]
    runs: list[StoredRun]
    config: str = msgspec.field(default="")

    @property
    def dropped(self) -> bool:
        """Its latest unmarked run failed or regressed, or scored below the one before's
        95% interval."""
        kept = (r for r in reversed(self.runs) if r.marked is None)  # the latest first
        last = next(kept, None)
        if last is None:
            return False
        if last.verdict in DROPPED:
            return True
        before = next(kept, None)
        if before is None:
            return False
        now, then = last.headline, before.headline
        return now is not None and then is not None and now.value < then.low


class Document(msgspec.Struct, frozen=True):
    """`evalgate history HISTORY --json -`: every config with its runs in time order."""

    schema: str
    history: str
    where: dict[str, str]
    configs: list[ConfigHistory]


_SCORES = RUN_COLUMNS.index("scores")
_COLUMNS = ", ".join(("config", "name", "labels", *RUN_COLUMNS))


def _marks(store: Store) -> tuple[dict[str, Mark], dict[str, Mark]]:
    """(runs marked, sweeps marked); the first mark of each is kept."""
    runs: dict[str, Mark] = {}
    sweeps: dict[str, Mark] = {}
    rows = store.query(
        "SELECT identity, sweep, reason, by_whom, at FROM curation WHERE action = 'mark' "
        "ORDER BY id"
    )
    for identity, sweep, reason, by, at in rows:
        if identity is not None:
            runs.setdefault(str(identity), Mark(reason, by, at))
        elif sweep is not None:
            sweeps.setdefault(str(sweep), Mark(reason, by, at, sweep=True))
    return runs, sweeps


def parse_where(given: Sequence[str]) -> dict[str, str]:
    """--where LABEL=VALUE, repeatable: the labels each run shown must have."""
    found: dict[str, str] = {}
    for item in given:
        label, equals, value = item.partition("=")
        if not equals or not label.strip():
            raise UsageError(f"--where {item!r} is not LABEL=VALUE (e.g. --where hardware=h100).")
        found[label.strip()] = value
    return found


_decode_labels = msgspec.json.Decoder(dict[str, Any])
_decode_scores = msgspec.json.Decoder(tuple[StoredScore, ...])


def configs(store: Store, where: Mapping[str, str] | None = None) -> list[ConfigHistory]:
    """Every config the history holds (matching `where`), its runs in time order; a UsageError
    for a --where label no run has, or a value none has."""
    where = dict(where or {})
    run_marks, sweep_marks = _marks(store)
    grouped: dict[str, ConfigHistory] = {}
    seen: dict[str, set[str]] = {}
    rows = store.query(f"SELECT {_COLUMNS} FROM runs ORDER BY recorded_at, sweep, identity")  # noqa: S608
    decoded: dict[str, dict[str, Any]] = {}  # a config's runs mostly carry the same labels
    for config, name, text, *fields in rows:
        labels = decoded.get(text)
        if labels is None:
            labels = decoded[text] = _decode_labels.decode(text)
        for key in where:
            if key in labels:
                seen.setdefault(key, set()).add(str(labels[key]))
        if not all(k in labels and str(labels[k]) == v for k, v in where.items()):
            continue
        history = grouped.get(config)
        if history is None:
            history = grouped[config] = ConfigHistory(name, labels, [], config)
        fields[_SCORES] = _decode_scores.decode(fields[_SCORES])
        fields.append(run_marks.get(fields[0]) or sweep_marks.get(fields[1]))  # its mark
        history.runs.append(StoredRun(*fields))
    _check_where(where, seen, bool(rows), store.location)
    return sorted(grouped.values(), key=_order)


def _order(history: ConfigHistory) -> tuple[Any, ...]:
    """Dropped first; then by name, numbers as numbers (conc=4 before conc=16), as verify does."""
    labels = history.labels
    numbers = tuple(labels.get(k) or 0 for k in ("isl", "osl", "concurrency"))
    name = history.name.partition(" isl=")[0]
    return (not history.dropped, name, *numbers, history.name, labels["task"])


def _check_where(
    where: Mapping[str, str], seen: Mapping[str, set[str]], any_runs: bool, location: str
) -> None:
    if not any_runs:
        return
    for key, value in where.items():
        if key not in seen:
            raise UsageError(
                f"--where {key}={value}: no run in {location} has the label {key!r}. Labels: "
                "task, model, model_prefix, hardware, framework, precision, kv_cache_dtype, isl, "
                "osl, concurrency, topology."
            )
        if value not in seen[key]:
            values = ", ".join(sorted(seen[key])[:10])
            raise UsageError(
                f"--where {key}={value}: no run in {location} has that value (it has: {values})."
            )


# -- the runs a fitted floor takes ---------------------------------------------------------------


class Completed(msgspec.Struct, frozen=True, array_like=True):
    """One completed, unmarked run on one filter: right answers, questions, when recorded, and
    the run's identity (which ties its filters together)."""

    correct: int
    n: int
    recorded_at: str
    identity: str


class CompletedRuns(msgspec.Struct, frozen=True):
    """One config (its labels, task and model among them) on one filter, and its completed
    unmarked runs in time order."""

    labels: dict[str, Any]
    filter: str
    runs: list[Completed]


def completed_runs(store: Store, where: Mapping[str, str] | None = None) -> list[CompletedRuns]:
    """Per config and filter, the completed runs not marked bad, in time order, each as (right
    answers, questions, time): what a floor fitted from the history takes. A completed run is
    one that was scored (pass, fail, inconclusive or regression), not one that errored."""
    found: dict[tuple[str, str], CompletedRuns] = {}
    for history in configs(store, where):
        for run in history.runs:
            if run.marked is not None:
                continue
            for score in run.scores:
                key = (history.config, score.filter)
                if key not in found:
                    found[key] = CompletedRuns(history.labels, score.filter, [])
                correct = round(score.value * score.n)
                found[key].runs.append(Completed(correct, score.n, run.recorded_at, run.identity))
    return list(found.values())


# -- the baseline a sweep is paired with ---------------------------------------------------------


def baseline(store: Store, results: Sequence[Entry], sweep: str | None) -> HistoryBaseline:
    """The baseline of each result's config: its last passing run that is not marked, not one of
    the sweep's own runs (by identity) and not of its sweep id. Configs with none are new."""
    unreadable = Collection()
    own: set[str] = set()
    wanted: set[str] = set()
    for entry in results:
        wanted.add(config_of(entry)[0])
        with contextlib.suppress(UsageError):  # unreadable: its pairing says so, reading it again
            own.add(run_identity(str(entry.path)))
    run_marks, sweep_marks = _marks(store)
    latest: dict[str, tuple[Any, ...]] = {}
    rows = store.query(
        "SELECT identity, sweep, config, model, labels, reason, recorded_at FROM runs "
        "WHERE verdict = 'pass' ORDER BY recorded_at, identity"
    )
    for row in rows:
        identity, run_sweep, config = row[0], row[1], row[2]
        if config not in wanted or identity in own or run_sweep == sweep:
            continue
        if identity in run_marks or run_sweep in sweep_marks:
            continue
        latest[config] = row
    entries = [_entry(store, row) for row in latest.values()]
    return HistoryBaseline(entries, unreadable, _loader(store))


def _entry(store: Store, row: tuple[Any, ...]) -> Entry:
    identity, sweep, _, model, labels_json, reason, recorded_at = row
    given = _decode_labels.decode(labels_json).items()
    labels = {k: v for k, v in given if k not in ("task", "model")}
    path = f"{store.location} sweep {sweep} run {identity} ({recorded_at})"
    return Entry(
        key=identity,
        outcome="pass",
        reason=reason,
        path=path,
        source="history",
        model=model,
        labels=msgspec.convert(labels, Labels),
    )


def _loader(store: Store) -> Callable[[Entry], Run]:
    def load(entry: Entry) -> Run:
        if entry.source == "history":
            return stored_run(store, entry.key, str(entry.path))
        return digested(load_entry(entry))

    return load


# -- the trend page (templates/history.html) -----------------------------------------------------
# Per config, its accuracy per sweep (the lowest filter's) with the 95% interval as a band, the
# floor as a line, fails and regressions marked in red, runs marked bad hollow; configs that
# dropped first. One SVG path per band and line, so a year of nightly sweeps stays small.

WIDTH = 720
HEIGHT = 120
PAD = 8
FAILED = frozenset({"fail", "regression"})


def _x(index: int, count: int) -> float:
    return PAD + (WIDTH - 2 * PAD) * (index / (count - 1) if count > 1 else 0.5)


def _points(points: Iterable[tuple[str, float]]) -> str:
    """A polyline's points: each x as written already, each y to a tenth."""
    return " ".join([f"{x},{y:.1f}" for x, y in points])


class Dot(NamedTuple):
    """A run marked on the line: failed (or regressed), or marked bad."""

    kind: str
    x: str
    y: str
    said: str


class Trend(NamedTuple):
    """One config's runs over time, as SVG coordinates: band, floor, line, marks, the ticks
    (value, y) and the first and last sweep."""

    label: str
    band: str
    floor: str
    line: str
    dots: list[Dot]
    ticks: list[tuple[float, str]]
    first: str
    last: str


def trend(history: ConfigHistory) -> Trend | None:
    """The drawing of one config's scored runs (None: no run was scored)."""
    scored = [(r, s) for r in history.runs if (s := r.headline) is not None]
    if not scored:
        return None
    runs = [r for r, _ in scored]
    scores = [s for _, s in scored]
    values = [v for s in scores for v in (s.low, s.high)]
    values += [r.floor for r in runs if r.floor is not None]
    scale = templates.Scale.around(values)
    # the scale's linear map to a height, worked out once for the chart's thousand points; the
    # scale spans every value drawn, so none needs clamping
    per = (HEIGHT - 2 * PAD) / (scale.high - scale.low)
    base = HEIGHT - PAD + scale.low * per

    count = len(runs)
    xs = [f"{_x(i, count):.1f}" for i in range(count)]  # written once for the four lines
    top = [base - s.high * per for s in scores]
    bottom = [base - s.low * per for s in scores]
    line = [base - s.value * per for s in scores]
    floors = [
        (x, base - r.floor * per) for x, r in zip(xs, runs, strict=True) if r.floor is not None
    ]
    dots = []
    for run, x, dot in zip(runs, xs, line, strict=True):
        if run.marked:
            dots.append(Dot("marked", x, f"{dot:.1f}", f"{run.sweep}: marked bad"))
        elif run.verdict in FAILED:
            dots.append(Dot("failed", x, f"{dot:.1f}", f"{run.sweep}: {run.verdict}"))
    label = (
        f"{history.name}: {count} runs from {runs[0].sweep} to {runs[-1].sweep}, "
        f"last {scores[-1].value:.3f}"
    )
    return Trend(
        label,
        f"M{_points(zip(xs, top, strict=True))} "
        f"L{_points(zip(xs[::-1], bottom[::-1], strict=True))} Z",
        _points(floors),
        _points(zip(xs, line, strict=True)),
        dots,
        [(t, f"{base - t * per + 4:.1f}") for t in scale.ticks()],
        runs[0].sweep,
        runs[-1].sweep,
    )


class Figure(NamedTuple):
    """A config's chart: its standing, caption and drawing."""

    history: ConfigHistory
    tone: templates.Tone
    word: str
    numbers: str
    floor: str
    notes: str
    trend: Trend | None


def _figure(history: ConfigHistory) -> Figure:
    last = history.runs[-1]
    score = last.headline
    numbers = (
        f"{score.value:.3f} [{score.low:.3f}, {score.high:.3f}] n={score.n}"
        if score is not None
        else "no score"
    )
    failed = sum(1 for r in history.runs if r.verdict in FAILED)
    marked = sum(1 for r in history.runs if r.marked is not None)
    tone = "fail" if history.dropped else templates.tone(last.verdict)
    word = "dropped" if history.dropped else last.verdict
    notes = [f"{len(history.runs)} runs", f"{failed} failed or regressed"]
    notes += [f"{marked} marked bad"] if marked else []
    floor = f"floor {last.floor:g} ({last.floor_matched})" if last.floor is not None else ""
    return Figure(history, tone, word.upper(), numbers, floor, ", ".join(notes), trend(history))


def render(location: str, found: Sequence[ConfigHistory], where: Mapping[str, str]) -> str:
    """The whole page."""
    dropped = sum(1 for h in found if h.dropped)
    runs = sum(len(h.runs) for h in found)
    return templates.render_page(
        "history.html",
        title="evalgate history",
        tone="fail" if dropped else "pass",
        summary=f"{len(found)} configs, {runs} runs, {dropped} dropped",
        counts=[("dropped", dropped, "fail"), ("steady", len(found) - dropped, "pass")],
        figures=[_figure(h) for h in found],
        width=WIDTH,
        height=HEIGHT,
        location=location,
        where=" ".join(f"{k}={v}" for k, v in where.items()),
    )
