"""Results on disk for `evalgate verify`: full GSM8K sweeps for `--baseline` in evalgate's layout
(result.json and samples.jsonl, built by tests/compare/run_files.write_run, valid against the
schemas) and in the benchmark harness's (meta_env.json, lm-eval's results_<ts>_conc<N>.json and
samples_gsm8k_<ts>_conc<N>.jsonl, as its job stages them); and one result at a time
(`result_doc`, checked against result.schema.json as it is made; `lm_eval_doc` and `meta_env` in
the formats the harness's `_write_lm_eval_meta_json` writes: isl/osl as strings, `hw`,
`infmax_model_prefix`, batches with `_conc<N>` suffixes).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evalgate.evidence.model import Labels
from evalgate.gate.verdict import Score
from evalgate.schemas import validation_errors
from evalgate.thresholds import parse_thresholds
from evalgate.verify import collect
from tests.compare.run_files import FILTERS, gsm8k_test, write_run

N = 1319
CONCS = (4, 8, 16, 32, 64)
THRESHOLDS = {"default": {"gsm8k": 0.85}}


def labels(conc: int, **changes: Any) -> dict[str, Any]:
    return {
        "model_prefix": "qwen3",
        "hardware": "h100",
        "framework": "vllm",
        "precision": "fp8",
        "kv_cache_dtype": "bf16",
        "isl": 1024,
        "osl": 1024,
        "concurrency": conc,
        **changes,
    }


def key(conc: int) -> str:
    return f"qwen3 h100 vllm fp8 kv=bf16 isl=1024 osl=1024 conc={conc}"


def answers(*, lost: int = 0, gained: int = 0, churn: int = 10, seed: int = 0) -> list[bool]:
    """About 95% right; `lost` of the baseline's right answers wrong, `gained` of its wrong ones
    right, and `churn` flips each way that cancel out (a rerun never answers exactly alike)."""
    base = [(i * 7 + 3) % 20 != 0 for i in range(N)]
    right = [i for i, r in enumerate(base) if r]
    wrong = [i for i, r in enumerate(base) if not r]
    new = list(base)
    start = 1 + seed * churn
    for i in right[start : start + lost + churn]:
        new[i] = False
    for i in wrong[start : start + gained + churn]:
        new[i] = True
    return new


def baseline_answers() -> list[bool]:
    return answers(churn=0)


def evalgate_sweep(
    root: Path, name: str, outcomes: dict[int, Sequence[bool]], **changes: Any
) -> Path:
    """One evalgate run folder per concurrency; `changes` go into every run's eval section,
    except `labels` (merged into the labels) and `status`."""
    extra = changes.pop("labels", {})
    for conc, correct in outcomes.items():
        write_run(
            root / f"{name}-conc{conc}", list(correct), labels=labels(conc, **extra), **changes
        )
    return root


def harness_sweep(
    root: Path,
    outcomes: dict[int, Sequence[bool]],
    *,
    stamp: str = "2026-05-01T10-00-00",
    **gen: Any,
) -> Path:
    """The harness's eval set: one meta_env.json for a batch of concurrencies, and lm-eval's
    results and samples files for each."""
    root.mkdir(parents=True, exist_ok=True)
    meta = {
        "is_multinode": False,
        "framework": "vllm",
        "precision": "fp8",
        "spec_decoding": "",
        "tp": 1,
        "ep": 1,
        "dp_attention": False,
        "conc": min(outcomes),
        "eval_concs": sorted(outcomes),
        "completed_eval_concs": sorted(outcomes),
        "failed_eval_concs": [],
        "model": "Qwen/Qwen3-8B",
        "infmax_model_prefix": "qwen3",
        "hw": "h100",
        "kv_cache_dtype": "bf16",
        "isl": "1024",
        "osl": "1024",
    }
    (root / "meta_env.json").write_text(json.dumps(meta), encoding="utf-8")
    for conc, correct in outcomes.items():
        write_lm_eval(root, f"{stamp}_conc{conc}", list(correct), **gen)
    return root


def write_lm_eval(folder: Path, suffix: str, correct: list[bool], **gen: Any) -> None:
    """results_<suffix>.json and samples_gsm8k_<suffix>.jsonl as lm-eval writes them."""
    settings = {"max_tokens": 5376, "temperature": 0, "top_p": 1, **gen}
    questions = gsm8k_test()
    lines = []
    for doc_id, right in enumerate(correct):
        question, target = questions[doc_id]
        for name in FILTERS:
            answer = target if right else "0"
            lines.append(
                {
                    "doc_id": doc_id,
                    "doc": {"question": question, "answer": f"... #### {target}"},
                    "target": target,
                    "arguments": {"gen_args_0": {"arg_0": "Question: ...", "arg_1": {}}},
                    "resps": [[f"The answer is #### {answer}"]],
                    "filtered_resps": [answer],
                    "filter": name,
                    "metrics": ["exact_match"],
                    "exact_match": 1.0 if right else 0.0,
                    "doc_hash": "d" * 64,
                }
            )
    score = sum(correct) / len(correct)
    results = {
        "results": {
            "gsm8k": {
                "alias": "gsm8k",
                **{f"exact_match,{f}": score for f in FILTERS},
                **{f"exact_match_stderr,{f}": 0.006 for f in FILTERS},
            }
        },
        "configs": {"gsm8k": {"task": "gsm8k", "num_fewshot": 5}},
        "versions": {"gsm8k": 3.0},
        "n-shot": {"gsm8k": 5},
        "n-samples": {"gsm8k": {"original": N, "effective": len(correct)}},
        "config": {
            "model": "local-chat-completions",
            "limit": None,
            "fewshot_seed": 1234,
            "gen_kwargs": ",".join(f"{k}={v}" for k, v in settings.items()),
        },
        "lm_eval_version": "0.4.9.2",
        "model_name": "Qwen/Qwen3-8B",
    }
    (folder / f"results_{suffix}.json").write_text(json.dumps(results), encoding="utf-8")
    (folder / f"samples_gsm8k_{suffix}.jsonl").write_text(
        "".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8"
    )


def thresholds(tmp: Path) -> Path:
    path = tmp / "thresholds.json"
    path.write_text(json.dumps(THRESHOLDS), encoding="utf-8")
    return path


# -- one result at a time ------------------------------------------------------------------------


DSR1_CONFIG = {
    "model_prefix": "dsr1",
    "hardware": "b200",
    "framework": "vllm",
    "precision": "fp8",
    "isl": 1024,
    "osl": 1024,
}
"""The config result_doc labels a result with unless told, but for its concurrency (64)."""


def result_doc(
    *,
    model: str | None = "deepseek-ai/DeepSeek-R1-0528",
    prefix: str | None = "dsr1",
    hardware: str | None = "b200",
    framework: str | None = "vllm",
    precision: str | None = "fp8",
    kv: str | None = None,
    isl: int | None = 1024,
    osl: int | None = 1024,
    conc: int | None = 64,
    topology: dict[str, Any] | None = None,
    status: str = "pass",
    stage: str = "done",
    reason: str = "strict-match 0.9500 >= threshold 0.9100",
    scores: tuple[float, ...] = (0.95, 0.955),
    n: int = 1319,
    stderr: float | str | None = "lm-eval",
    task: str = "gsm8k_evalgate_chat",
    run_passed: bool | None = None,
    error: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A complete evalgate result document, valid against result.schema.json."""
    filters = ("strict-match", "flexible-extract")
    passed = status == "pass" if run_passed is None else run_passed
    finished = status not in ("error", "aborted", "running")
    doc = {
        "schema": "evalgate.result/1",
        "evalgate_version": "0.1.0",
        "run_id": "0123456789abcdef",
        "status": status,
        "stage": stage,
        "reason": reason,
        "error": error,
        "exit_code": {"pass": 0, "fail": 1, "error": 4, "aborted": 6, "running": 0}[status],
        "started_at": "2026-05-01T10:00:00+00:00",
        "finished_at": None if status == "running" else "2026-05-01T10:20:00+00:00",
        "timings": {"context": 0.2, "probe": 0.4, "eval": 1180.5, "total": 1181.1},
        "model": model,
        "labels": {
            "model_prefix": prefix,
            "hardware": hardware,
            "framework": framework,
            "precision": precision,
            "kv_cache_dtype": kv,
            "isl": isl,
            "osl": osl,
            "concurrency": conc,
            "topology": topology,
        },
        "endpoint": {
            "base_url": "http://127.0.0.1:8000/v1",
            "api": "chat",
            "worker_urls": [],
            "engine": {"owned_by": "vllm", "version": "0.32.0", "model_root": None},
        },
        "context": {
            "eval_max_model_len": 2304,
            "max_tokens": 1800,
            "budget_policy": "fit",
            "requested": None,
            "native": {"value": 163840, "source": "config.json"},
            "served": [{"value": 2304, "source": "/v1/models"}],
            "prompt_tokens": {"value": 480, "source": "/tokenize"},
            "steps": ["ISL + OSL + 256 = 2304"],
        },
        "probe": {
            "outcome": "ok",
            "status_code": 200,
            "engine_message": None,
            "latency_s": 0.4,
            "prompt_tokens": 480,
            "max_tokens": 1800,
            "doc_id": 7,
        },
        "eval": {
            "task": task,
            "api": "chat",
            "num_fewshot": 5,
            "fewshot_seed": 1234,
            "limit": None if n == 1319 else n,
            "num_concurrent": conc or 1,
            "max_tokens": 1800,
            "temperature": 0.0,
            "questions": n,
            "lm_eval_version": "0.4.13",
            "dataset": {"source": "bundled", "sha256": {"test.jsonl": "ab", "train.jsonl": "cd"}},
            "requests": {"total": n, "completed": n, "failed": 0, "truncated": 0, "empty": 0},
        }
        if finished
        else None,
        "scores": [
            {
                "task": task,
                "metric": "exact_match",
                "filter": f,
                "value": v,
                "stderr": round((v * (1 - v) / max(n - 1, 1)) ** 0.5, 6)
                if stderr == "lm-eval"
                else stderr,
                "n": n,
            }
            for f, v in zip(filters, scores, strict=False)
        ]
        if finished
        else [],
        "threshold": {"value": 0.91, "matched": "prefix:dsr1", "file": "thresholds.json"},
        "checks": [
            {"metric": "exact_match", "filter": f, "value": v, "threshold": 0.91, "passed": passed}
            for f, v in zip(filters, scores, strict=False)
        ]
        if finished
        else [],
        "warnings": [],
        "files": {"samples": "samples.jsonl"},
    }
    assert validation_errors("result", doc) == []
    return doc


def write_result(folder: Path, **kwargs: Any) -> Path:
    """result_doc(**kwargs) as `folder`/result.json, with a samples.jsonl beside it."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "result.json"
    path.write_text(json.dumps(result_doc(**kwargs), indent=2))
    (folder / "samples.jsonl").write_text('{"doc_id": 0}\n')
    return path


def lm_eval_doc(
    strict: float = 0.95, flexible: float = 0.955, n: int = 1319, task: str = "gsm8k"
) -> dict[str, Any]:
    """An lm-eval 0.4.13 results file as the harness stages it."""
    stderr = "N/A" if n == 1 else round((strict * (1 - strict) / max(n - 1, 1)) ** 0.5, 6)
    return {
        "results": {
            task: {
                "alias": task,
                "exact_match,strict-match": strict,
                "exact_match_stderr,strict-match": stderr,
                "exact_match,flexible-extract": flexible,
                "exact_match_stderr,flexible-extract": stderr,
            }
        },
        "group_subtasks": {task: []},
        "configs": {
            task: {
                "task": task,
                "metric_list": [{"metric": "exact_match"}],
                "filter_list": [{"name": "strict-match"}, {"name": "flexible-extract"}],
            }
        },
        "versions": {task: 3.0},
        "n-shot": {task: 5},
        "n-samples": {task: {"original": 1319, "effective": n}},
        "config": {"model": "local-chat-completions", "limit": None if n == 1319 else n},
        "model_name": "deepseek-ai/DeepSeek-R1-0528",
        "lm_eval_version": "0.4.13",
    }


def meta_env(**overrides: Any) -> dict[str, Any]:
    """A meta_env.json as the harness's _write_lm_eval_meta_json writes it."""
    meta = {
        "is_multinode": False,
        "framework": "sglang",
        "precision": "fp4",
        "spec_decoding": "",
        "eval_suite": "gsm8k",
        "recipe_fingerprint": "",
        "tp": 4,
        "pp": 1,
        "dcp_size": 1,
        "pcp_size": 1,
        "conc": 32,
        "ep": 1,
        "dp_attention": False,
        "prefill_tp": 4,
        "prefill_pp": 1,
        "prefill_dcp_size": 1,
        "prefill_pcp_size": 1,
        "prefill_ep": 1,
        "prefill_dp_attention": False,
        "prefill_num_workers": 1,
        "decode_tp": 4,
        "decode_pp": 1,
        "decode_dcp_size": 1,
        "decode_pcp_size": 1,
        "decode_ep": 1,
        "decode_dp_attention": False,
        "decode_num_workers": 1,
        "model": "openai/gpt-oss-120b",
        "infmax_model_prefix": "gptoss",
        "hw": "mi355x",
        "isl": "1024",
        "osl": "8192",
    }
    meta.update(overrides)
    return meta


def write_harness(
    folder: Path,
    meta: dict[str, Any] | None = None,
    results: dict[str, dict[str, Any]] | None = None,
) -> Path:
    """A harness run folder: `meta` as meta_env.json and each of `results` (by file name)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "meta_env.json").write_text(json.dumps(meta if meta is not None else meta_env()))
    for name, doc in (
        results
        if results is not None
        else {"results_2026-05-01T10-00-00.000001.json": lm_eval_doc()}
    ).items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(json.dumps(doc))
    return folder


def parsed_thresholds(data: dict[str, Any] | None = None) -> Any:
    """`data` (default: 0.90, dsr1 and gptoss 0.91 on GSM8K) read as a thresholds file."""
    return parse_thresholds(
        data
        or {
            "default": {"gsm8k": 0.90},
            "models": {"dsr1": {"gsm8k": 0.91}, "gptoss": {"gsm8k": 0.91}},
        },
        "thresholds.json",
    )


def found(
    *,
    scores: tuple[Score, ...] = (),
    status: str | None = None,
    failed_on_scores: bool = False,
    model: str | None = "m",
    reason: str | None = None,
    **labels: Any,
) -> collect.Found:
    """What verify collected from one evalgate result: dsr1 on b200 at conc 64 unless told."""
    base = Labels(**{"model_prefix": "dsr1", "hardware": "b200", "concurrency": 64, **labels})
    return collect.Found(
        "x/result.json", "evalgate", model, base, scores, status, "eval", reason, failed_on_scores
    )


def sweep_of(tmp_path: Path, count: int) -> Path:
    """`count` runs, every fifth at its own hardware; one broken result.json among them."""
    for i in range(count):
        write_result(tmp_path / f"run-{i:03d}", hardware=f"h{i % 5}", conc=i + 1)
    (tmp_path / "run-007" / "result.json").write_text("{not json")
    return tmp_path
