"""Run folders as evalgate writes them (result.json, samples.jsonl), built in tmp_path for
compare, verify and the reports: who got which question right, by filter."""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from evalgate.schemas import validation_errors
from evalgate.tasks.dataset import bundled_dir

FILTERS = ("strict-match", "flexible-extract")


@cache
def gsm8k_test() -> tuple[tuple[str, str], ...]:
    """(question, reference answer) for the 1319 bundled GSM8K test questions."""
    rows = []
    for line in (bundled_dir() / "test.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        rows.append((row["question"], row["answer"].split("####")[-1].strip()))
    return tuple(rows)


def protocol(**changes: Any) -> dict[str, Any]:
    """result.json's eval section; keyword arguments replace fields."""
    section: dict[str, Any] = {
        "task": "gsm8k_evalgate_chat",
        "task_version": "3.0",
        "task_sha256": "a" * 64,
        "api": "chat",
        "num_fewshot": 5,
        "fewshot_seed": 1234,
        "limit": None,
        "num_concurrent": 64,
        "max_tokens": 1024,
        "temperature": 0.0,
        "questions": 1319,
        "lm_eval_version": "0.4.13",
        "dataset": {
            "source": "bundled",
            "location": "evalgate/tasks/data/gsm8k",
            "sha256": {"test": "3730d312" + "0" * 56, "train": "17f347dc" + "0" * 56},
        },
        "requests": {"total": 0, "completed": 0, "failed": 0, "truncated": 0, "empty": 0},
    }
    section.update(changes)
    return section


def write_run(
    folder: Path,
    correct: Sequence[bool] | dict[str, Sequence[bool]],
    *,
    labels: dict[str, Any] | None = None,
    failed: Sequence[int] = (),
    status: str = "pass",
    stage: str = "done",
    question_edits: dict[int, str] | None = None,
    **eval_changes: Any,
) -> Path:
    """A run folder: result.json and samples.jsonl, both valid against their schemas.

    `correct` says per doc_id (0, 1, ...) whether the answer was right, for every filter or
    per filter; doc_ids in `failed` have a failed request instead of an answer.
    """
    per_filter = correct if isinstance(correct, dict) else dict.fromkeys(FILTERS, correct)
    n = len(next(iter(per_filter.values())))
    questions = gsm8k_test()
    records = []
    for doc_id in range(n):
        question, target = questions[doc_id]
        question = (question_edits or {}).get(doc_id, question)
        wrong = "0" if target != "0" else "1"
        error = "HTTP 400: prompt too long" if doc_id in failed else None
        records.append(
            {
                "doc_id": doc_id,
                "question": question,
                "target": target,
                "prompt_sha256": f"{doc_id:064x}",
                "response": None if error else f"... #### {target}",
                "finish_reason": None if error else "stop",
                "completion_tokens": None if error else 42,
                "error": error,
                "filters": {}
                if error
                else {
                    name: {
                        "extracted": target if right[doc_id] else wrong,
                        "correct": right[doc_id],
                    }
                    for name, right in per_filter.items()
                },
            }
        )
    scored = [r for r in records if r["error"] is None]
    section = protocol(**eval_changes)
    section["requests"] = {
        "total": n,
        "completed": len(scored),
        "failed": n - len(scored),
        "truncated": 0,
        "empty": 0,
    }
    result = {
        "schema": "evalgate.result/1",
        "evalgate_version": "0.1.0",
        "run_id": folder.name,
        "status": status,
        "stage": stage,
        "reason": "scores >= threshold",
        "exit_code": 0,
        "started_at": "2026-01-01T00:00:00Z",
        "finished_at": "2026-01-01T00:10:00Z",
        "timings": {"eval": 600.0},
        "model": "Qwen/Qwen3-8B",
        "labels": {"hardware": "h100", "kv_cache_dtype": "bf16", **(labels or {})},
        "warnings": [],
        "eval": section,
        "scores": [
            {
                "task": section["task"],
                "metric": "exact_match",
                "filter": name,
                "value": sum(r["filters"][name]["correct"] for r in scored) / max(len(scored), 1),
                "stderr": None,
                "n": len(scored),
            }
            for name in per_filter
        ],
        "checks": [],
    }
    assert validation_errors("result", result) == []
    lines = [json.dumps(r) + "\n" for r in records]
    for record, line in zip(records, lines, strict=True):
        if line not in VALID_LINES:
            assert validation_errors("sample", record) == []
            VALID_LINES.add(line)
    folder.mkdir(parents=True)
    (folder / "result.json").write_text(json.dumps(result), encoding="utf-8")
    (folder / "samples.jsonl").write_text("".join(lines), encoding="utf-8")
    return folder


VALID_LINES: set[str] = set()
"""samples.jsonl lines already checked against the schema: a sweep's runs repeat most of each
other's lines, and the check (jsonschema, 2 ms a line) was nearly all of a sweep's cost."""


def paired_outcomes(
    n: int, *, lost: int = 0, gained: int = 0, right: float = 0.8
) -> tuple[list[bool], list[bool]]:
    """Baseline and candidate correctness: the first `lost` questions flip to wrong, the next
    `gained` flip to right, and of the rest about a fraction `right` is right in both."""
    base = [True] * lost + [False] * gained
    cand = [False] * lost + [True] * gained
    rest = n - lost - gained
    shared = [i * right % 1 + right >= 1 for i in range(rest)]
    return base + shared, cand + shared


def write_pair(folder: Path, n: int, limit: int | None = None, **outcomes: Any) -> None:
    """Runs a and b in `folder`: n paired questions, as paired_outcomes(n, **outcomes) has them
    (and a --limit of `limit`, where given)."""
    base, cand = paired_outcomes(n, **outcomes)
    given = {} if limit is None else {"limit": limit}
    write_run(folder / "a", base, **given)
    write_run(folder / "b", cand, **given)


def comparison_json(cli: Any, *argv: str | Path) -> tuple[int, dict[str, Any]]:
    code, out, _ = cli("compare", *argv, "--json", "-")
    document = json.loads(out)
    assert validation_errors("comparison", document) == []
    assert document["exit_code"] == code
    return code, document
