"""Sweeps on disk for `evalgate verify --baseline`: full GSM8K runs in evalgate's layout
(result.json and samples.jsonl, built by tests/compare/run_files.write_run, valid against the
schemas)
and in the benchmark harness's (meta_env.json, lm-eval's results_<ts>_conc<N>.json and
samples_gsm8k_<ts>_conc<N>.jsonl, as its job stages them).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

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
