"""A sweep's set of configs: how each is named, what ``--expect`` asks for (a count, or a
manifest of partial configs each matched by exactly one config found: docs/verify.md, "The
expected set"), and the set checks: two results for one config are a duplicate, always; with an
expectation, a config missing or unexpected is a problem too.
"""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
from msgspec import structs

from evalgate import numbers
from evalgate.errors import ArtifactError, UsageError
from evalgate.evidence.model import LABEL_NAMES, Labels, Positive
from evalgate.reader import read
from evalgate.scrub import capped
from evalgate.tasks.dataset import known_name
from evalgate.thresholds import TASK_KEY
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


# A config is identified by (task, model, model_prefix, hardware, framework, precision,
# kv_cache_dtype, isl, osl, concurrency, topology) and named by a readable key, e.g.
# ``dsr1 b200 vllm fp8 isl=1024 osl=1024 conc=64 tp=8`` (GSM8K) or
# ``dsr1 b200 vllm fp8 isl=1024 osl=1024 conc=64 tp=8 task=gpqa_diamond_cot_n_shot``.

FIELDS = frozenset(("model", "task", *LABEL_NAMES))
_ALIASES = {"conc": "concurrency"}
_NUMBERS = {"isl": "isl", "osl": "osl", "concurrency": "conc"}
"""The numeric fields of a config, and the word its key shows each by."""
RANGES = {
    "isl": (1, numbers.TOKENS_MAX, "--isl"),
    "osl": (1, numbers.TOKENS_MAX, "--osl"),
    "concurrency": (1, numbers.CONCURRENCY_MAX, "--num-concurrent"),
}
"""Each numeric field's range: the one its setting holds, so a manifest expects only a config a
run can have."""
_SHORT = {
    "dp_attention": "dpa",
    "num_workers": "workers",
    "spec_decoding": "spec",
    "prefill_": "p.",
    "decode_": "d.",
}


MAX_CONFIGS = 10_000
"""Configs a manifest may name in all: each is matched against every result found."""


class Expectation(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What --expect asks for: a number of configs, or configs each matched exactly once."""

    source: str
    count: Positive | None
    configs: tuple[Mapping[str, Any], ...]


# -- config identity -----------------------------------------------------------------------------


_RENAMED = (("dp_attn", "dp_attention"), ("ep_size", "ep"))
"""Topology names as the benchmark job's variables spell them (PREFILL_DP_ATTN, EP_SIZE) and as
its meta_env.json does (prefill_dp_attention, ep)."""


def _canonical_name(key: str) -> str:
    for spelled, canonical in _RENAMED:
        if key == spelled or key.endswith("_" + spelled):
            return key[: len(key) - len(spelled)] + canonical
    return key


def _canonical_value(value: Any) -> Any:
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
        if text.isascii() and text.isdigit():  # ASCII digits only (evalgate.numbers)
            return int(text)
    return value


def canonical_topology(topology: Any) -> Any:
    """One spelling of a topology, whichever tool recorded it: the job's variable names as
    meta_env.json names them (p.dp_attn=true and p.dpa=true are one config), "true" and "8" as
    true and 8; is_multinode, which the phase keys already say, left out."""
    if not isinstance(topology, Mapping):
        return topology
    return {
        _canonical_name(key): _canonical_value(value)
        for key, value in topology.items()
        if key != "is_multinode"
    }


def config_task(task: str | None) -> str:
    """A config's task, one name whichever tool ran it: evalgate's own GSM8K task files
    (gsm8k_evalgate_chat, gsm8k_evalgate_completions) and the harness's are gsm8k; none named
    (a result before 0.2.0 that stopped before its eval, an --expect entry without one) is
    gsm8k."""
    return known_name(task) if task else TASK_KEY


def config_identity(model: str | None, labels: Labels | None, task: str | None) -> tuple[Any, ...]:
    """The tuple that makes two results the same config: the task, the model and the labels
    (docs/verify.md, "How a config and a run are identified")."""
    labels = labels or Labels()
    topology = canonical_topology(labels.topology)
    return (
        config_task(task),
        model,
        *(getattr(labels, key) for key in LABEL_NAMES[:-1]),
        tuple(sorted(topology.items())) if isinstance(topology, dict) else topology,
    )


def _topology_words(topology: Mapping[str, Any]) -> str:
    """A topology's words: tp=8 ep=1 dpa=false."""
    words = []
    for key, value in canonical_topology(topology).items():
        name = key
        for long, short in _SHORT.items():
            name = name.replace(long, short)
        shown = str(value).lower() if isinstance(value, bool) else value
        words.append(f"{name}={shown}")
    return " ".join(words)


def config_key(
    model: str | None, labels: Labels | None, task: str | None = None, *, with_model: bool = False
) -> str:
    """The readable name of a (possibly partial) config, used in every message; its task is
    named when it is not GSM8K (task=gpqa_diamond_cot_n_shot), the task a name without one
    means (as in --expect and --waivers)."""
    labels = labels or Labels()
    prefix, kv, topology = labels.model_prefix, labels.kv_cache_dtype, labels.topology
    words = [prefix or model, labels.hardware, labels.framework, labels.precision]
    words.append(kv and f"kv={kv}")
    numbers = {word: getattr(labels, name) for name, word in _NUMBERS.items()}
    words += [f"{word}={value}" for word, value in numbers.items() if value is not None]
    if isinstance(topology, Mapping):
        words.append(_topology_words(topology))
    if config_task(task) != TASK_KEY:
        words.append(f"task={task}")
    if with_model and prefix and model:
        words.append(f"model={model}")
    return " ".join([str(w) for w in words if w]) or "(unlabelled)"


def told_apart(results: Sequence[Entry]) -> list[Entry]:
    """The results, the model name added to the key where two different configs share one."""
    uses = Counter(entry.key for entry in results)
    configs: dict[str, set[tuple[Any, ...]]] = {}
    for entry in results:
        if uses[entry.key] > 1:
            configs.setdefault(entry.key, set()).add(
                config_identity(entry.model, entry.labels, entry.task)
            )
    return [
        structs.replace(e, key=config_key(e.model, e.labels, e.task, with_model=True))
        if len(configs.get(e.key, ())) > 1
        else e
        for e in results
    ]


# -- the expectation -----------------------------------------------------------------------------


def _number(field: str, value: Any, where: str) -> Any:
    """isl, osl and concurrency as numbers in their ranges, however the manifest spells them
    (1024 or "1024", evalgate.numbers' rule); a task as its name."""
    if field == "task" and (not isinstance(value, str) or not value.strip()):
        raise UsageError(
            f"{where} gives task as {capped(repr(value), 200)}: give a task's name, e.g. "
            '"gsm8k" or "gpqa_diamond_cot_n_shot".'
        )
    if field not in RANGES or value is None:
        return value
    number = value
    if isinstance(value, str):
        try:
            number = numbers.whole(value)
        except ValueError:
            number = None
    if not isinstance(number, int) or isinstance(number, bool):
        raise UsageError(
            f"{where} gives {field} as {capped(repr(value), 200)}: give a whole number, e.g. "
            '1024 or "1024".'
        )
    low, high, setting = RANGES[field]
    if numbers.within(number, low, high):
        unset = (
            " (a run given 0 has none: write null)"
            if number == 0 and field != "concurrency"
            else ""
        )
        raise UsageError(
            f"{where}: {field} {capped(numbers.shown(number), 40)} is out of range: give "
            f"{numbers.span(low, high)}, as {setting} takes{unset}."
        )
    return number


def _expand(entry: Any, where: str, used: int) -> list[dict[str, Any]]:
    """The configs one manifest entry stands for (each list value is each of its items); `used`
    configs come before it."""
    if not isinstance(entry, dict) or not entry:
        raise UsageError(
            f"{where} is {capped(repr(entry), 200)}: each expected config is a non-empty object."
        )
    if set(_ALIASES) | set(_ALIASES.values()) <= set(entry):
        raise UsageError(f"{where} gives both conc and concurrency: give one of them.")
    entry = {_ALIASES.get(k, k): v for k, v in entry.items()}
    unknown = sorted(set(entry) - FIELDS)
    if unknown:
        raise UsageError(f"{where} has unknown field(s) {unknown}; use {sorted(FIELDS)}.")
    empty = [k for k, v in entry.items() if v == []]
    if empty:
        raise UsageError(
            f"{where} gives {empty[0]} as an empty list, which expects no config at all: give "
            "its values, or leave the field out."
        )
    axes = [
        [(k, _number(k, x, where)) for x in (v if isinstance(v, list) else [v])]
        for k, v in entry.items()
    ]
    size = math.prod(map(len, axes))
    if used + size > MAX_CONFIGS:  # its lists multiply: a few lines can name billions
        before = f", {used + size:,} with the entries before it" if used else ""
        raise UsageError(
            f"{where} expands to {size:,} config{'s' * (size != 1)} (the product of its "
            f"lists){before}; a manifest names at most {MAX_CONFIGS:,} in all. List the configs "
            "the sweep ran."
        )
    return [dict(combo) for combo in itertools.product(*axes)]


def parse_expectation(data: Any, source: str) -> Expectation:
    """A count, {"count": N}, a list of partial configs or {"configs": [...]}; else UsageError."""
    if isinstance(data, dict) and set(data) == {"count"}:
        data = data["count"]
    if isinstance(data, int) and not isinstance(data, bool):
        if not 1 <= data <= MAX_CONFIGS:
            raise UsageError(
                f"--expect {source}: the expected count is out of range: give 1 to "
                f"{MAX_CONFIGS:,} (as many configs as a manifest may name)."
            )
        return Expectation(source, count=data, configs=())
    if isinstance(data, dict) and set(data) == {"configs"}:
        data = data["configs"]
    if not isinstance(data, list) or not data:
        raise UsageError(
            f"--expect {source} is neither a count nor a manifest: give a number, "
            '{"count": N}, or a JSON list of configs such as [{"model_prefix": "dsr1", '
            '"hardware": "b200", "concurrency": [4, 8]}].'
        )
    configs: list[dict[str, Any]] = []
    first: dict[str, int] = {}
    for index, entry in enumerate(data):
        for config in _expand(entry, f"{source} entry {index}", len(configs)):
            key = json.dumps(config, sort_keys=True, default=str)
            if key in first:  # one result would meet both entries: the manifest hides a gap
                twice = f"entries {first[key]} and {index}" if first[key] < index else "a list"
                raise UsageError(
                    f"--expect {source} lists the config {config} twice ({twice}): one result "
                    "would count for both. List each config once."
                )
            first[key] = index
            configs.append(config)
    return Expectation(source, count=None, configs=tuple(configs))


def load_expectation(value: str) -> Expectation:
    """--expect: a number, or the path of a JSON file holding a count or a manifest."""
    if value.strip().isascii() and value.strip().isdigit():
        try:  # evalgate.numbers' rule, which also bounds the digits read (int() of 5,000 fails)
            count = numbers.whole(value)
        except ValueError as exc:
            raise UsageError(f"--expect {capped(value, 40)}: {exc}.") from exc
        return parse_expectation(count, value)
    try:
        data = read(value)
    except ArtifactError as exc:
        raise UsageError(f"--expect: {exc.message}") from exc
    return parse_expectation(data, value)
