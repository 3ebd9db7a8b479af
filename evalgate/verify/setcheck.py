"""The set checks of a sweep: two results for one config are a duplicate, always; with an
expectation (``--expect``, expect.py), a config missing or unexpected is a problem too."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from evalgate.evidence.stage_records import Labels
from evalgate.verify.expect import Expectation, canonical_topology, config_key, config_task
from evalgate.verify.records import Entry, SetOutcome


def _matches(want: Mapping[str, Any], entry: Entry) -> bool:
    """Whether a config found is the one expected: every field the manifest gives, and its
    task (GSM8K where the manifest names none)."""
    if config_task(want.get("task")) != config_task(entry.task):
        return False
    labels = entry.labels or Labels()
    for key, value in want.items():
        if key == "task":
            continue
        have = entry.model if key == "model" else getattr(labels, key)
        if key == "topology" and isinstance(value, Mapping):
            topology = canonical_topology(have) if isinstance(have, Mapping) else {}
            if any(topology.get(k) != v for k, v in canonical_topology(value).items()):
                return False
        elif have != value:
            return False
    return True


def _duplicates(results: Sequence[Entry], uses: Counter[str]) -> list[Entry]:
    """A config with more than one result."""
    groups: dict[str, list[Entry]] = {}
    for entry in results:
        if uses[entry.key] > 1:
            groups.setdefault(entry.key, []).append(entry)
    return [
        group[0].problem(
            "duplicate",
            f"{len(group)} results for one config: {', '.join(str(e.path) for e in group)}. "
            "Remove the stale ones (or fix their labels)",
        )
        for group in groups.values()
    ]


def _manifest(results: Sequence[Entry], expectation: Expectation) -> list[Entry]:
    """Each expected config matched by exactly one config found, and every config expected."""
    problems: list[Entry] = []
    source = expectation.source
    claimed: set[str] = set()
    for want in expectation.configs:
        hits = sorted({e.key for e in results if _matches(want, e)})
        claimed.update(hits)
        if len(hits) == 1:
            continue
        model, task = want.get("model"), config_task(want.get("task"))
        labels = Labels(**{k: v for k, v in want.items() if k not in ("model", "task")})
        name = config_key(model, labels, task)
        outcome: SetOutcome = "duplicate" if hits else "missing"
        reason = (
            f"expected config {name} matches {len(hits)} configs: {'; '.join(hits)}. "
            "Name it more precisely in the manifest"
            if hits
            else f"expected config {name} (--expect {source}) has no result"
        )
        problems.append(
            Entry(name, outcome, reason, model=model, labels=labels, expected=want, task=task)
        )
    problems += [
        e.problem("unexpected", f"{e.key} is not in the expected set (--expect {source})")
        for e in results
        if e.key not in claimed
    ]
    return problems


def check_set(results: Sequence[Entry], expectation: Expectation | None) -> list[Entry]:
    """The set's problems: duplicates always; with an expectation, missing and unexpected
    configs too."""
    uses = Counter(entry.key for entry in results)
    problems = _duplicates(results, uses)
    if expectation is None:
        return problems
    if expectation.configs:
        return problems + _manifest(results, expectation)
    want = expectation.count
    if want is not None and len(uses) != want:
        outcome: SetOutcome = "missing" if len(uses) < want else "unexpected"
        reason = f"expected {want} configs (--expect {expectation.source}), found {len(uses)}"
        problems.append(Entry(f"expected {want} configs", outcome, reason))
    return problems
