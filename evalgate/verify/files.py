"""A sweep's files, each read into what verify judges: a run (Found), or why not (a Note).

evalgate's result.json is read whole into the evidence model, and verify keeps what the gate
rule needs. An ``evalgate hook`` summary gives the runs it lists as "not run"; a harness eval
set (a meta_env.json and its lm-eval results) gives its runs through harness_output.py.
"""

from __future__ import annotations

import os
from typing import Any

from msgspec import structs

from evalgate.errors import ArtifactError, FormatError
from evalgate.evidence import read as json_file
from evalgate.evidence.artifacts import read_hook, read_result
from evalgate.evidence.folder import holder
from evalgate.evidence.model import Result
from evalgate.evidence.stage_records import Labels
from evalgate.verify import harness_output
from evalgate.verify.records import Collection, Found, Note


def read(path: str, reader: Any, notes: Collection) -> Any:
    """`reader(path)`, or None with the reason the file is not usable noted as malformed: a
    reader's error is about that one file, never the end of the sweep."""
    try:
        return reader(path)
    except ArtifactError as exc:
        notes.malformed.append(Note(path, exc.message))
        return None


def result(path: str, notes: Collection) -> Found | None:
    """The run one result.json holds, as verify needs it (None: noted as malformed)."""
    run = read(path, read_result, notes)
    if run is None:
        return None
    return Found(
        path=path,
        source="evalgate",
        model=run.model,
        labels=run.labels,
        scores=tuple(run.scores),
        status=run.status,
        stage=run.stage,
        reason=run.reason + (f" ({run.error.type})" if run.error else ""),
        failed_on_scores=any(not c.passed for c in run.checks),
        verdict=run.verdict,
        early_stop=run.eval.early_stop if run.eval else None,
        holder=holder(os.path.dirname(path)) if run.status == "running" else None,
        task=task_of(run),
    )


def task_of(run: Result) -> str | None:
    """The task a result.json names; one written before results named it (before 0.2.0): its
    eval's task, and with no eval None (GSM8K), as it was read then."""
    if isinstance(run.task, str):
        return run.task
    return run.eval.task if run.eval else None


def lm_eval(path: str, notes: Collection) -> Any:
    """An lm-eval results file's document, or None (noted: unreadable, or not lm-eval's)."""
    doc = read(path, json_file.read, notes)
    if doc is not None and (not isinstance(doc, dict) or "lm_eval_version" not in doc):
        notes.ignored.append(Note(path, f"{path} is not an lm-eval result (no lm_eval_version)"))
        return None
    return doc


def hook(path: str, sibling: Found | None, notes: Collection) -> list[Found]:
    """The runs an `evalgate hook` summary lists as "not run" (an earlier run stopped it),
    labelled like a run found beside it."""
    summary = read(path, read_hook, notes)
    if summary is None:
        return []
    labels = sibling.labels if sibling else Labels()
    model = sibling.model if sibling else None
    return [
        Found(
            path,
            "evalgate",
            model,
            structs.replace(labels, concurrency=run.concurrency),
            (),
            "skipped",
            None,
            run.reason or "not run",
            task=sibling.task if sibling else None,
        )
        for run in summary.runs
        if run.status == "not run"
    ]


def harness_set(meta_path: str, paths: list[str], notes: Collection) -> list[Found]:
    """The runs one meta_env.json and its lm-eval results describe (read now, not before)."""
    files = [(path, doc) for path in paths if (doc := lm_eval(path, notes)) is not None]
    try:
        runs, unusable = harness_output.runs(meta_path, json_file.read(meta_path), files)
    except ArtifactError as exc:  # the meta_env.json cannot be read
        reason = exc.message
    except FormatError as exc:
        reason = f"{meta_path} {exc}"
    else:
        notes.malformed += unusable
        return runs
    lost = f"; the {len(files)} lm-eval result(s) it describes go unchecked" if files else ""
    notes.malformed.append(Note(meta_path, reason + lost))
    return []
