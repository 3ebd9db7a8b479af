"""A finished run read back from its folder, and what two runs must share to be compared.

A run is a folder holding result.json and samples.jsonl (or the path of that result.json). What
the protocol covers: docs/compare.md, "Protocol: runs must have been measured the same way".
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import msgspec

from evalgate.errors import ArtifactError, UsageError
from evalgate.evidence.artifacts import RESULT_NAME, SAMPLES_NAME, read_result, read_samples
from evalgate.evidence.model import EvalRecord, Protocol, Result, Sample
from evalgate.scrub import capped

_SHOWN = 5


class Run(msgspec.Struct, frozen=True, dict=True):
    """A run that evaluated (evaluated_run): its result, the result's eval section, and its
    samples keyed by doc_id (read from disk, or still in memory)."""

    path: Path
    result: Result
    eval: EvalRecord
    samples: Mapping[int, Sample]

    @cached_property
    def filters(self) -> tuple[str, ...]:
        """The filters scored, in the order the samples first name them."""
        names = itertools.chain.from_iterable(s.filters for s in self.samples.values())
        return tuple(dict.fromkeys(names))


class Difference(msgspec.Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    """One way two runs' protocols differ (comparison.json leaves out an empty detail)."""

    field: str
    baseline: str
    candidate: str
    detail: str = ""

    def describe(self, candidate: str = "candidate") -> str:
        """'max_tokens: baseline 1024, candidate 2048' (`candidate`: what the other run is
        called)."""
        text = f"{self.field}: baseline {self.baseline}, {candidate} {self.candidate}"
        return f"{text} ({self.detail})" if self.detail else text


def evaluated_run(path: Path, result: Result, samples: Sequence[Sample]) -> Run:
    """A run that evaluated, from its result and samples; one that stopped before is refused."""
    if result.eval is None:
        raise ArtifactError(
            f"{path} has no eval section: that run stopped at stage {result.stage} "
            f"({result.reason}) before evaluating. Compare two runs that evaluated."
        )
    return Run(path, result, result.eval, {sample.doc_id: sample for sample in samples})


def load_run(path: Path) -> Run:
    """A run from its folder or its result.json; it must have evaluated."""
    result_path = path / RESULT_NAME if path.is_dir() else path
    if not result_path.is_file():
        raise ArtifactError(
            f"{path} is neither a run folder holding {RESULT_NAME} nor a result file. Pass the "
            "folder evalgate run wrote (its --output-dir) or the result.json inside it."
        )
    result = read_result(result_path)
    samples = read_samples(result_path.parent / SAMPLES_NAME) if result.eval is not None else ()
    return evaluated_run(result_path, result, samples)


def show(value: Any) -> str:
    """A protocol value as a difference names it ("none": null, or absent from an older file)."""
    return (
        "none" if value is None or value is msgspec.UNSET else json.dumps(value, ensure_ascii=False)
    )


def format_doc_ids(ids: Sequence[int]) -> str:
    """'doc_id 3, 17, 20, 41, 52, ...': the first few of a list of questions."""
    listed = ", ".join(str(i) for i in ids[:_SHOWN])
    return f"doc_id {listed}" + (", ..." if len(ids) > _SHOWN else "")


def eval_differences(base: Protocol, cand: Protocol) -> list[Difference]:
    """How two protocols differ: each field, and the data set by the sha256 of each split."""
    found = [
        Difference(name, show(getattr(base, name)), show(getattr(cand, name)))
        for name in Protocol.__struct_fields__
        if name != "dataset" and getattr(base, name) != getattr(cand, name)
    ]
    base_sha, cand_sha = base.dataset.sha256, cand.dataset.sha256
    found += [
        Difference(f"dataset.sha256.{split}", show(base_sha.get(split)), show(cand_sha.get(split)))
        for split in sorted(set(base_sha) | set(cand_sha))
        if base_sha.get(split) != cand_sha.get(split)
    ]
    return found


def protocol_differences(base: Run, cand: Run) -> list[Difference]:
    """Every protocol difference between two runs (their eval sections, then the questions they
    ask and the filters they score); empty when they are comparable."""
    found = eval_differences(base.eval, cand.eval)
    only_base = sorted(set(base.samples) - set(cand.samples))
    only_cand = sorted(set(cand.samples) - set(base.samples))
    if only_base or only_cand:
        parts = [
            f"{len(ids)} only in the {side}: {format_doc_ids(ids)}"
            for side, ids in (("baseline", only_base), ("candidate", only_cand))
            if ids
        ]
        was, now = (f"{len(run.samples)} questions" for run in (base, cand))
        found.append(Difference("question set", was, now, "; ".join(parts)))
    shared = sorted(set(base.samples) & set(cand.samples))
    for name, field in (
        ("question", "question text"),
        ("target", "target text"),
        ("repeat", "repeat"),
        ("cluster", "repeated question"),
    ):
        changed = [
            i for i in shared if getattr(base.samples[i], name) != getattr(cand.samples[i], name)
        ]
        if changed:
            values = [getattr(run.samples[changed[0]], name) for run in (base, cand)]
            was, now = (show(capped(v, 60) if isinstance(v, str) else v) for v in values)
            detail = f"differs for {len(changed)} shared questions: {format_doc_ids(changed)}"
            found.append(Difference(field, was, now, detail))
    if base.filters and cand.filters and set(base.filters) != set(cand.filters):
        found.append(Difference("filters", ", ".join(base.filters), ", ".join(cand.filters)))
    return found


def refuse_overlap(baseline: Path, output_dir: Path) -> None:
    """--baseline in --output-dir: this run would write over the run it compares with."""
    folder = baseline.parent if baseline.name == RESULT_NAME else baseline
    if folder.resolve() == output_dir.resolve():
        raise UsageError(
            f"--baseline {baseline} is this run's --output-dir {output_dir}: the run would "
            "write over the run it compares with. Choose another --output-dir."
        )


def check_baseline(baseline: Run, path: Path, planned: Protocol) -> None:
    """A run's --baseline, checked before the eval: found only after it, a missing baseline or
    one measured another way would cost the whole eval and then turn its verdict into exit 2.
    All but the budget, known only after the probe (compared with the rest after the eval);
    UsageError (exit 2) names each difference."""
    differences = [d.describe("this run") for d in eval_differences(baseline.eval, planned)]
    if differences:
        raise UsageError(
            f"--baseline {path} was not measured the same way as this run, so the comparison "
            "would be refused after the whole eval: " + "; ".join(differences) + ". Run with "
            "the baseline's settings, or choose another --baseline."
        )
