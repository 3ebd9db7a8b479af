"""An lm-eval run of the benchmark harness read back as compare's Run, to pair it question by
question: its results_*.json (the protocol) and the samples_<task>_*.jsonl beside it (the
answers; docs/verify.md, "Against the last good sweep").
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec
from msgspec import UNSET

from evalgate.compare.runs import Run, evaluated_run
from evalgate.errors import ArtifactError
from evalgate.evidence.fields import Api, Integer, Status
from evalgate.evidence.harness_layout import samples_path
from evalgate.evidence.identity import run_identity
from evalgate.evidence.model import (
    RESULT_SCHEMA,
    Answer,
    DatasetRecord,
    EvalRecord,
    Result,
    Sample,
)
from evalgate.evidence.read import decode_lines, read, read_bytes
from evalgate.evidence.request_counts import RequestCounts
from evalgate.evidence.stage_records import Labels
from evalgate.rules.verdict import GATED_METRIC

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
