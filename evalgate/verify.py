"""`evalgate verify`: gate a whole sweep's results at once, and check the set is complete.

Every result found (collect.py) is gated on its own threshold (thresholds.py) with the rules of
stats.py; then the set itself is checked: nothing found is a failure, two results for one config
are a failure, and with an expectation (``--expect``) a missing or unexpected config is too.

A config is identified by (model, model_prefix, hardware, framework, precision, kv_cache_dtype,
isl, osl, concurrency, topology) and named by a readable key, e.g.
``dsr1 b200 vllm fp8 isl=1024 osl=1024 conc=64 tp=8``.

The expectation (``--expect``) is a count (``--expect 10``, or a JSON file ``{"count": 10}``) or
a JSON manifest: a list of partial configs, or ``{"configs": [...]}``. Each entry names some of
the identity fields (``conc`` is accepted for ``concurrency``; ``topology`` matches a subset);
a list value stands for each of its items, so one entry can expand to a whole sweep:
``[{"model_prefix": "dsr1", "hardware": "b200", "isl": 1024, "osl": 1024,
"concurrency": [4, 8, 16, 32, 64]}]``. Each entry must match exactly one config found.

The sweep's verdict: FAIL (exit 1) if any result fails, errored, is malformed, missing,
duplicated or unexpected, or nothing was found; else INCONCLUSIVE (exit 5) if any score is too
uncertain to decide; else PASS (exit 0).
"""

from __future__ import annotations

import gc
import itertools
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from evalgate.collect import LABELS, Collection, Found, Note, collect
from evalgate.errors import ExitCode, ThresholdsError, UsageError
from evalgate.stats import GSM8K_TEST_SIZE, judge
from evalgate.thresholds import TASK_KEY, Floor, Thresholds, resolve_floor
from evalgate.verdict import GATED_METRIC

Outcome = Literal[
    "pass",
    "fail",
    "inconclusive",
    "error",
    "malformed",
    "missing",
    "unexpected",
    "duplicate",
    "empty",
]
OUTCOMES: tuple[Outcome, ...] = (
    "pass",
    "fail",
    "inconclusive",
    "error",
    "malformed",
    "missing",
    "unexpected",
    "duplicate",
    "empty",
)
Verdict = Literal["pass", "fail", "inconclusive"]
FAILING = frozenset(OUTCOMES) - {"pass", "inconclusive"}
IDENTITY = ("model", *LABELS)
FIELDS = frozenset(IDENTITY)
_ALIASES = {"conc": "concurrency"}
_NUMERIC = {"isl", "osl", "concurrency"}
_SHORT = {
    "dp_attention": "dpa",
    "num_workers": "workers",
    "spec_decoding": "spec",
    "prefill_": "p.",
    "decode_": "d.",
}


@dataclass(frozen=True)
class CheckRow:
    """One exact_match score against its threshold, with its uncertainty."""

    task: str
    metric: str
    filter: str
    value: float
    stderr: float | None
    n: int
    low: float
    high: float
    threshold: float
    matched: str
    outcome: Literal["pass", "fail", "inconclusive"]


@dataclass(frozen=True)
class Entry:
    """One line of the verdict: a result gated, or a problem with the set."""

    key: str
    outcome: Outcome
    reason: str
    path: str | None = None
    source: str | None = None
    model: str | None = None
    labels: Mapping[str, Any] | None = None
    status: str | None = None
    stage: str | None = None
    checks: tuple[CheckRow, ...] = ()


@dataclass(frozen=True)
class Expectation:
    """What --expect asks for: a number of configs, or configs each matched exactly once."""

    source: str
    count: int | None = None
    configs: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class Report:
    """The sweep's verdict and every line behind it."""

    verdict: Verdict
    exit_code: int
    reason: str
    entries: tuple[Entry, ...]
    paths: tuple[str, ...]
    thresholds_file: str
    min_samples: int
    expectation: Expectation | None
    ignored: tuple[Note, ...]

    def count(self, outcome: Outcome) -> int:
        """How many entries have this outcome."""
        return sum(1 for entry in self.entries if entry.outcome == outcome)


# -- config identity -----------------------------------------------------------------------------


def identity(model: str | None, labels: Mapping[str, Any]) -> tuple[Any, ...]:
    """The tuple that makes two results the same config."""
    topology = labels.get("topology")
    return (
        model,
        *(labels.get(key) for key in LABELS[:-1]),
        tuple(sorted(topology.items())) if isinstance(topology, dict) else topology,
    )


@cache
def _topology_words(items: tuple[tuple[str, Any], ...]) -> str:
    words = []
    for key, value in items:
        name = key
        for long, short in _SHORT.items():
            name = name.replace(long, short)
        shown = str(value).lower() if isinstance(value, bool) else value
        words.append(f"{name}={shown}")
    return " ".join(words)


def config_key(model: str | None, labels: Mapping[str, Any], *, with_model: bool = False) -> str:
    """The readable name of a (possibly partial) config, used in every message."""
    get = labels.get
    kv, isl, osl, conc, topology = (
        get("kv_cache_dtype"),
        get("isl"),
        get("osl"),
        get("concurrency"),
        get("topology"),
    )
    words = [
        get("model_prefix") or model,
        get("hardware"),
        get("framework"),
        get("precision"),
        kv and f"kv={kv}",
        None if isl is None else f"isl={isl}",
        None if osl is None else f"osl={osl}",
        None if conc is None else f"conc={conc}",
        _topology_words(tuple(topology.items())) if isinstance(topology, dict) else None,
        f"model={model}" if with_model and get("model_prefix") and model else None,
    ]
    return " ".join(str(w) for w in words if w) or "(unlabelled)"


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


def _listing(rows: Sequence[CheckRow]) -> str:
    return ", ".join(
        f"{r.filter} {r.value:.4f} (95% CI {r.low:.4f}-{r.high:.4f}, n={r.n})" for r in rows
    )


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


def _checks(found: Found, floors: Floors, min_samples: int) -> tuple[CheckRow, ...]:
    rows = []
    for score in (s for s in found.scores if s.metric == GATED_METRIC):
        floor = floors.find(found.model, found.labels, score.task)
        verdict = judge(score.value, score.n, floor.value, min_samples, score.stderr)
        rows.append(
            CheckRow(
                score.task,
                score.metric,
                score.filter,
                score.value,
                verdict.stderr,
                score.n,
                verdict.low,
                verdict.high,
                floor.value,
                floor.matched,
                verdict.outcome,
            )
        )
    return tuple(rows)


def _judge(found: Found, checks: Sequence[CheckRow], min_samples: int) -> tuple[Outcome, str]:
    if not checks:
        return "fail", "no exact_match score in the result: nothing to gate"
    if found.status == "fail" and not found.failed_on_scores:
        return "fail", f"the run failed: {found.reason}"
    failed = [r for r in checks if r.outcome == "fail"]
    unsure = [r for r in checks if r.outcome == "inconclusive"]
    first = (failed or unsure or checks)[0]
    floor = f"threshold {first.threshold:.4f} ({first.matched})"
    if failed:
        return "fail", f"{_listing(failed)} below {floor}"
    if unsure:
        return "inconclusive", (
            f"{_listing(unsure)} vs {floor}: the 95% interval straddles the threshold and "
            f"n < {min_samples}; run the full test set, or pass --min-samples 0 to decide on "
            "the point estimate"
        )
    return "pass", f"{_listing(checks)} >= {floor}"


def gate(found: Found, key: str, floors: Floors, min_samples: int = GSM8K_TEST_SIZE) -> Entry:
    """The verdict on one result: its run's own status, then every exact_match score."""
    checks: tuple[CheckRow, ...] = ()
    problem = _run_problem(found)
    if problem is not None:
        outcome: Outcome = "error"
        reason = problem
    else:
        try:
            checks = _checks(found, floors, min_samples)
            outcome, reason = _judge(found, checks, min_samples)
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


# -- the expected set ----------------------------------------------------------------------------


def _number(field: str, value: Any) -> Any:
    """isl, osl and concurrency as numbers, however the manifest spells them."""
    if field in _NUMERIC and isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return value


def _expand(entry: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(entry, dict) or not entry:
        raise UsageError(f"{where} is {entry!r}: each expected config is a non-empty object.")
    entry = {_ALIASES.get(k, k): v for k, v in entry.items()}
    unknown = sorted(set(entry) - FIELDS)
    if unknown:
        raise UsageError(f"{where} has unknown field(s) {unknown}; use {sorted(FIELDS)}.")
    axes = [
        [(k, _number(k, x)) for x in (v if isinstance(v, list) else [v])] for k, v in entry.items()
    ]
    return [dict(combo) for combo in itertools.product(*axes)]


def parse_expectation(data: Any, source: str) -> Expectation:
    """A count, {"count": N}, a list of partial configs or {"configs": [...]}; else UsageError."""
    if isinstance(data, dict) and set(data) == {"count"}:
        data = data["count"]
    if isinstance(data, int) and not isinstance(data, bool):
        if data < 1:
            raise UsageError(f"--expect {source}: the expected count must be 1 or more.")
        return Expectation(source, count=data)
    if isinstance(data, dict) and set(data) == {"configs"}:
        data = data["configs"]
    if not isinstance(data, list) or not data:
        raise UsageError(
            f"--expect {source} is neither a count nor a manifest: give a number, "
            '{"count": N}, or a JSON list of configs such as [{"model_prefix": "dsr1", '
            '"hardware": "b200", "concurrency": [4, 8]}].'
        )
    configs = [c for i, e in enumerate(data) for c in _expand(e, f"{source} entry {i}")]
    return Expectation(source, configs=tuple(configs))


def load_expectation(value: str) -> Expectation:
    """--expect: a number, or the path of a JSON file holding a count or a manifest."""
    if value.strip().isdigit():
        return parse_expectation(int(value), value)
    try:
        with open(value, encoding="utf-8") as stream:
            data = json.load(stream)
    except OSError as exc:
        raise UsageError(f"Cannot read --expect file {value}: {exc.strerror}.") from exc
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"--expect file {value} is not valid JSON (line {exc.lineno}: {exc.msg})."
        ) from exc
    return parse_expectation(data, value)


def _matches(want: Mapping[str, Any], entry: Entry) -> bool:
    labels = entry.labels or {}
    for key, value in want.items():
        have = entry.model if key == "model" else labels.get(key)
        if key == "topology" and isinstance(value, Mapping):
            topology = have if isinstance(have, Mapping) else {}
            if any(topology.get(k) != v for k, v in value.items()):
                return False
        elif have != value:
            return False
    return True


def check_set(results: Sequence[Entry], expectation: Expectation | None) -> list[Entry]:
    """Duplicates always; with an expectation, missing and unexpected configs too."""
    problems: list[Entry] = []
    groups: dict[str, list[Entry]] = {}
    for entry in results:
        groups.setdefault(entry.key, []).append(entry)
    for key, group in groups.items():
        if len(group) > 1:
            paths = ", ".join(str(e.path) for e in group)
            problems.append(
                Entry(
                    key,
                    "duplicate",
                    (
                        f"{len(group)} results for one config: {paths}. Remove the stale ones (or "
                        "fix their labels)"
                    ),
                    group[0].path,
                    model=group[0].model,
                    labels=group[0].labels,
                )
            )
    if expectation is None:
        return problems
    if expectation.count is not None:
        if len(groups) != expectation.count:
            outcome: Outcome = "missing" if len(groups) < expectation.count else "unexpected"
            problems.append(
                Entry(
                    f"expected {expectation.count} configs",
                    outcome,
                    (
                        f"expected {expectation.count} configs (--expect {expectation.source}), "
                        f"found {len(groups)}"
                    ),
                )
            )
        return problems
    claimed: set[str] = set()
    for want in expectation.configs:
        hits = sorted({e.key for e in results if _matches(want, e)})
        claimed.update(hits)
        name = config_key(want.get("model"), want)
        if not hits:
            problems.append(
                Entry(
                    name,
                    "missing",
                    f"expected config {name} (--expect {expectation.source}) has no result",
                    model=want.get("model"),
                    labels=want,
                )
            )
        elif len(hits) > 1:
            problems.append(
                Entry(
                    name,
                    "duplicate",
                    (
                        f"expected config {name} matches {len(hits)} configs: {'; '.join(hits)}. "
                        "Name it more precisely in the manifest"
                    ),
                    model=want.get("model"),
                    labels=want,
                )
            )
    problems += [
        Entry(
            e.key,
            "unexpected",
            f"{e.key} is not in the expected set (--expect {expectation.source})",
            e.path,
            model=e.model,
            labels=e.labels,
        )
        for e in results
        if e.key not in claimed
    ]
    return problems


# -- the sweep -----------------------------------------------------------------------------------


def _keys(found: Sequence[Found]) -> list[str]:
    """Readable keys; the model name is added where two different configs would share one."""
    keys = [config_key(f.model, f.labels) for f in found]
    users: dict[str, list[int]] = {}
    for index, key in enumerate(keys):
        users.setdefault(key, []).append(index)
    for indexes in users.values():
        if (
            len(indexes) > 1
            and len({identity(found[i].model, found[i].labels) for i in indexes}) > 1
        ):
            for i in indexes:
                keys[i] = config_key(found[i].model, found[i].labels, with_model=True)
    return keys


def _order(entry: Entry) -> tuple[Any, ...]:
    """Entries by config, numbers as numbers (conc=4 before conc=16); the rest by name after."""
    labels = entry.labels
    if labels is None:
        return (1, entry.key, "", 0, 0, 0, entry.path or "", entry.outcome)
    get = labels.get
    return (
        0,
        str(get("model_prefix") or entry.model),
        entry.key.split(" isl=")[0],
        get("isl") or 0,
        get("osl") or 0,
        get("concurrency") or 0,
        entry.key,
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


def decide(
    collection: Collection,
    thresholds: Thresholds,
    *,
    paths: Iterable[str],
    expectation: Expectation | None = None,
    min_samples: int = GSM8K_TEST_SIZE,
) -> Report:
    """Gate every result found, check the set, and reach the sweep's verdict (pure)."""
    floors = Floors(thresholds)
    found = collection.found
    keys = _keys(found)
    gated = [gate(f, k, floors, min_samples) for f, k in zip(found, keys, strict=True)]
    entries: list[Entry] = list(gated)
    entries += [Entry(n.path, "malformed", n.reason, n.path) for n in collection.malformed]
    entries += [
        Entry(root, "empty", f"no eval results found under {root}", root)
        for root in collection.empty
    ]
    entries += check_set(gated, expectation)
    entries.sort(key=_order)
    results = len(found) + len(collection.malformed)
    verdict, code, reason = summarise(entries, results, len(set(keys)))
    return Report(
        verdict,
        code,
        reason,
        tuple(entries),
        tuple(paths),
        thresholds.path,
        min_samples,
        expectation,
        tuple(collection.ignored),
    )


def verify(
    paths: Sequence[str],
    thresholds: Thresholds,
    *,
    expectation: Expectation | None = None,
    min_samples: int = GSM8K_TEST_SIZE,
) -> Report:
    """Collect every result under `paths` and decide (reads files; never prints or exits).

    The cyclic garbage collector is paused meanwhile: parsing 10^5 JSON documents allocates
    millions of containers, none in a cycle, and the collector would rescan the growing heap
    again and again (it doubled the time at 100,000 artifacts).
    """
    paused = gc.isenabled()
    gc.disable()
    try:
        return decide(
            collect(paths),
            thresholds,
            paths=paths,
            expectation=expectation,
            min_samples=min_samples,
        )
    finally:
        if paused:
            gc.enable()
