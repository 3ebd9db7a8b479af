"""The benchmark harness's eval output, a meta_env.json and the lm-eval results it describes, as
runs (docs/verify.md, "What it finds"). Pure: the documents arrive parsed (files.py reads them);
one that breaks its format raises FormatError, whose message says how.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from msgspec import structs

from evalgate.errors import FormatError
from evalgate.evidence.harness_layout import meta_labels, meta_text
from evalgate.evidence.model import Score
from evalgate.evidence.stage_records import Labels
from evalgate.rules.verdict import GATED_METRIC
from evalgate.verify.records import Found, Note

CONC_SUFFIX = re.compile(r"_conc(\d+)(?:_\d+)?\.json$")


# -- lm-eval's results*.json ---------------------------------------------------------------------


def lm_eval_scores(doc: Mapping[str, Any]) -> tuple[Score, ...]:
    """The exact_match scores (every filter) in an lm-eval results file; FormatError if broken."""
    results = doc.get("results")
    if not isinstance(results, dict):
        raise FormatError('has no "results" object')
    counts = doc.get("n-samples") if isinstance(doc.get("n-samples"), dict) else {}
    scores = []
    for task, metrics in results.items():
        if not isinstance(metrics, dict):
            raise FormatError(f"results.{task} is not an object")
        for key, value in metrics.items():
            metric, _, flt = key.partition(",")
            if not flt or metric.endswith("_stderr") or metric != GATED_METRIC:
                continue
            if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value <= 1:
                raise FormatError(f"results.{task}.{key} is {value!r}, not a number in [0, 1]")
            sizes = counts.get(task) if isinstance(counts, dict) else None
            n = sizes.get("effective") if isinstance(sizes, dict) else None
            if not isinstance(n, int) or isinstance(n, bool) or n < 0:
                raise FormatError(
                    f"n-samples.{task}.effective is {n!r}: the sample size is unknown"
                )
            stderr = metrics.get(f"{metric}_stderr,{flt}")
            ok = isinstance(stderr, int | float) and not isinstance(stderr, bool)
            error = float(stderr) if ok and stderr is not None else None
            scores.append(
                Score(task=task, metric=metric, filter=flt, value=float(value), stderr=error, n=n)
            )
    return tuple(scores)


# -- one eval set: a meta_env.json and the lm-eval results it describes --------------------------


def _run(
    path: str,
    model: str | None,
    labels: Labels,
    conc: int | None,
    *,
    scores: tuple[Score, ...] = (),
    reason: str | None = None,
    task: str | None = None,
) -> Found:
    """One eval at one concurrency: its scores, or why it has none (`reason`: it errored)."""
    status, stage = ("error", "eval") if reason is not None else (None, None)
    labels = structs.replace(labels, concurrency=conc)
    return Found(path, "lm-eval", model, labels, scores, status, stage, reason, task=task)


def _single(
    meta_path: str,
    model: str | None,
    labels: Labels,
    batch: Mapping[str, Any],
    staged: list[Found],
    *,
    files: int,
) -> list[Found]:
    """One eval (no eval_concs): its runs, or why it has none (`files`: results found beside)."""
    conc = labels.concurrency
    if exit_code := batch["exit_code"]:
        failed = f"the harness recorded eval_exit_code = {exit_code} in {meta_path}"
        made = [(run.path, run.task) for run in staged] or [(meta_path, None)]
        return [_run(path, model, labels, conc, reason=failed, task=task) for path, task in made]
    if not files:
        missing = (
            "meta_env.json has no lm-eval results*.json beside it: the eval failed, was "
            "skipped, or its results were never staged"
        )
        return [_run(meta_path, model, labels, conc, reason=missing)]
    return [
        _run(run.path, run.model, labels, conc, scores=run.scores, task=run.task) for run in staged
    ]


def _batch(
    meta_path: str,
    model: str | None,
    labels: Labels,
    batch: Mapping[str, Any],
    staged: list[Found],
) -> tuple[list[Found], list[Note]]:
    runs: list[Found] = []
    unusable: list[Note] = []
    failed = set(batch["failed"] or ())
    by_conc: dict[int, list[Found]] = {}
    for run in staged:
        match = CONC_SUFFIX.search(os.path.basename(run.path))
        if match is None:
            unusable.append(
                Note(
                    run.path,
                    f"{run.path} has no _conc<N> suffix although {meta_path} "
                    "describes a batch (eval_concs): its concurrency is unknown",
                )
            )
        else:
            by_conc.setdefault(int(match.group(1)), []).append(run)
    listed = set(batch["eval_concs"]) | set(batch["completed"] or ()) | failed
    for conc in sorted(listed | set(by_conc)):
        files = by_conc.get(conc, [])
        if conc in failed:
            where = files[0].path if files else meta_path
            why = f"the harness lists concurrency {conc} in failed_eval_concs of {meta_path}"
            task = files[0].task if files else None
            runs.append(_run(where, model, labels, conc, reason=why, task=task))
            continue
        if not files:
            why = (
                f"meta_env.json lists concurrency {conc} but no results*_conc{conc}.json "
                "was staged: that eval failed, was skipped, or its results were lost"
            )
            runs.append(_run(meta_path, model, labels, conc, reason=why))
        runs += [
            _run(run.path, run.model, labels, conc, scores=run.scores, task=run.task)
            for run in files
        ]
    return runs, unusable


def runs(meta_path: str, meta: Any, files: list[tuple[str, Any]]) -> tuple[list[Found], list[Note]]:
    """The runs one meta_env.json and its lm-eval results (path, document) describe, and the
    results files that cannot be used; FormatError if the meta_env.json itself is broken."""
    model, labels, batch = meta_labels(meta)
    unusable: list[Note] = []
    staged: list[Found] = []
    for path, doc in files:
        try:
            scores = lm_eval_scores(doc)
        except FormatError as exc:
            unusable.append(Note(path, f"{path} {exc}"))
            continue
        name = model or meta_text(doc, "model_name")
        tasks = {score.task for score in scores}
        task = tasks.pop() if len(tasks) == 1 else None
        staged.append(Found(path, "lm-eval", name, labels, scores, task=task))
    if batch["eval_concs"] is None:
        return _single(meta_path, model, labels, batch, staged, files=len(files)), unusable
    batched, unlabelled = _batch(meta_path, model, labels, batch, staged)
    return batched, unusable + unlabelled
