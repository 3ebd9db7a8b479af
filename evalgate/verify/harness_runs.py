"""The benchmark harness's eval output read back: a meta_env.json and the lm-eval results it
describes, as the runs verify judges (docs/verify.md, "What it finds"); and one lm-eval run as
compare's Run, to pair it question by question: its results_*.json (the protocol) and the
samples_<task>_*.jsonl beside it (the answers; docs/verify.md, "Against the last good sweep").
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec
from msgspec import UNSET, structs

from evalgate.compare.runs import Run, evaluated_run
from evalgate.errors import ArtifactError, FormatError
from evalgate.evidence.harness import meta_labels, meta_text, samples_path
from evalgate.evidence.model import (
    RESULT_SCHEMA,
    Answer,
    Api,
    DatasetRecord,
    EvalRecord,
    Integer,
    Labels,
    RequestCounts,
    Result,
    Sample,
    Score,
    Status,
)
from evalgate.evidence.outputs import run_identity
from evalgate.gate.verdict import GATED_METRIC
from evalgate.reader import decode_lines, read, read_bytes
from evalgate.verify.records import Found, Note

UNRECORDED = frozenset({"task_sha256", "fewshot_seed", "temperature", "task_version"})
"""Protocol fields lm-eval's files may not hold: unset in a Run read here."""
_APIS: dict[str, Api] = {
    "local-chat-completions": "chat",
    "openai-chat-completions": "chat",
    "local-completions": "completions",
    "openai-completions": "completions",
}


class LineRecord(msgspec.Struct, frozen=True):
    """What pairing reads of one line of lm-eval's samples file."""

    doc_id: Integer
    filter: str
    doc: dict[str, Any] = {}
    target: Any = None
    filtered_resps: list[Any] = []
    exact_match: float | None = None


def _text(value: Any) -> str:
    """An answer or target as text: lm-eval keeps lists nested ([[answer]]) and numbers."""
    while isinstance(value, list) and value:
        value = value[0]
    return "" if value is None or value == [] else str(value)


def _question(doc: Mapping[str, Any]) -> str:
    for name in ("question", "Question", "problem"):
        if isinstance(doc.get(name), str):
            return str(doc[name])
    return json.dumps(doc, sort_keys=True, ensure_ascii=False, default=str)


def _samples(path: Path) -> list[Sample]:
    """The samples file's lines, one Sample per doc_id with every filter's answer."""
    records = decode_lines(read_bytes(path), LineRecord, str(path), "is not an lm-eval sample")
    merged: dict[int, Sample] = {}
    first_asked: dict[str, int] = {}
    for record in records:
        if record.exact_match is None:
            raise ArtifactError(f"{path}: doc_id {record.doc_id} has no {GATED_METRIC}.")
        answer = Answer(extracted=_text(record.filtered_resps), correct=record.exact_match == 1)
        known = merged.get(record.doc_id)
        if known is not None:
            if record.filter in known.filters:
                raise ArtifactError(
                    f"{path} repeats doc_id {record.doc_id} for filter {record.filter}."
                )
            known.filters[record.filter] = answer
            continue
        question = _question(record.doc)
        repeat = record.doc.get("repeat_id")
        repeat = repeat if isinstance(repeat, int) and not isinstance(repeat, bool) else None
        merged[record.doc_id] = Sample(
            doc_id=record.doc_id,
            prompt_sha256="",
            response=None,  # pairing reads the filtered answers, not the whole response
            finish_reason=None,
            error=None,
            question=question,
            target=_text(record.target),
            filters={record.filter: answer},
            cluster=None if repeat is None else first_asked.setdefault(question, record.doc_id),
            repeat=repeat,
        )
    return list(merged.values())


def _object(doc: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = doc.get(key)
    return value if isinstance(value, dict) else {}


def _settings(doc: Mapping[str, Any], task: str) -> dict[str, Any]:
    """The generation settings: config.gen_kwargs ("k=v,k=v" or an object) over the task's."""
    found = _object(_object(_object(doc, "configs"), task), "generation_kwargs").copy()
    given = _object(doc, "config").get("gen_kwargs")
    if isinstance(given, str):
        pairs = (item.partition("=") for item in given.split(",") if "=" in item)
        given = {key.strip(): value.strip() for key, _, value in pairs}
    if isinstance(given, dict):
        found.update(given)
    return found


def _number(value: Any, kind: type[int] | type[float]) -> Any:
    try:
        return kind(value) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError):
        return None


def _protocol(path: Path, doc: Mapping[str, Any], task: str, asked: int) -> EvalRecord:
    config = _object(doc, "config")
    api: Api | None = _APIS.get(str(config.get("model")))
    settings = _settings(doc, task)
    budget = _number(settings.get("max_tokens", settings.get("max_gen_toks")), int)
    shots = _number(_object(doc, "n-shot").get(task), int)
    if api is None or budget is None or shots is None:
        raise ArtifactError(
            f"{path} does not say how its run was made (config.model {config.get('model')!r}, "
            f"max_tokens {budget!r}, n-shot {shots!r}): it cannot be paired. Pair runs whose "
            "lm-eval results record them."
        )
    version = _object(doc, "versions").get(task)
    temperature = _number(settings.get("temperature"), float)
    seed = _number(config.get("fewshot_seed"), int)
    return EvalRecord(
        task=task,
        task_version=UNSET if version is None else str(version),
        api=api,
        num_fewshot=shots,
        fewshot_seed=UNSET if seed is None else seed,
        max_tokens=budget,
        temperature=UNSET if temperature is None else temperature,
        limit=_number(config.get("limit"), int),
        dataset=DatasetRecord(source="hub", sha256={}),
        lm_eval_version=str(doc.get("lm_eval_version")),
        requests=RequestCounts(total=asked, completed=asked, failed=0, truncated=0, empty=0),
    )


def load_lm_eval_run(results: str, status: Status) -> Run:
    """The run of one lm-eval results file and its samples file; `status` is the gate's
    outcome of it (lm-eval records none). An ArtifactError when either cannot be used."""
    path = Path(results)
    doc = read(path)
    tasks = list(doc.get("results") or {}) if isinstance(doc, dict) else []
    if len(tasks) != 1:
        raise ArtifactError(f"{path} holds {len(tasks)} tasks, not one: it cannot be paired.")
    task = tasks[0]
    samples_file = samples_path(path, task)
    if not samples_file.is_file():
        raise ArtifactError(
            f"{path} has no {samples_file.name} beside it: its answers cannot be paired. Stage "
            "lm-eval's samples file (--log_samples) with its results."
        )
    samples = _samples(samples_file)
    result = Result(
        schema=RESULT_SCHEMA,
        evalgate_version="",
        run_id=run_identity(path),  # what it holds, not where it lies
        status=status,
        stage="done",
        reason="",
        exit_code=0,
        started_at="",
        finished_at=None,
        timings={},
        model=doc.get("model_name") if isinstance(doc.get("model_name"), str) else None,
        labels=Labels(),
        task=task,
        eval=_protocol(path, doc, task, len(samples)),
        scores=[],
        checks=[],
        warnings=[],
    )
    return evaluated_run(path, result, samples)


# The eval output as runs. Pure: the documents arrive parsed (collect.py reads them); one that
# breaks its format raises FormatError, whose message says how.

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
            unknown = f"{run.path} has no _conc<N> suffix although {meta_path} describes a batch"
            unusable.append(Note(run.path, f"{unknown} (eval_concs): its concurrency is unknown"))
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
