"""The benchmark harness as its job runs evalgate and reads what it staged.

The hook runs as the harness's job would run it, with only the job's own variables set. The
staged folder is then read the way the harness reads it (REFERENCE.md §5): its upload patterns,
its collector (`utils/collect_eval_results.py`: the folder holding a meta_env.json, lm-eval
results by their `lm_eval_version`, one row per `_conc<N>` file of a batch, labelled from
meta_env.json) and its validator (`utils/evals/validate_scores.py`: threshold by the results'
task name and `infmax_model_prefix`, every `exact_match,*` metric against it, the batch keys
against the requested concurrencies). The readers below follow those rules; they are written
here from the harness's documented behaviour, not taken from it.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FAST

HARNESS_YAML = """\
# Model thresholds override task defaults.
default:
  gsm8k: 0.90
  gpqa_diamond_cot_n_shot: 0.30
  swebench_lite: 0.50
models:
  dsr1:
    gsm8k: 0.91
  dsv4:
    gsm8k: 0.91
  glm5:
    gsm8k: 0.94
  glm5.1:
    gsm8k: 0.93
  gptoss:
    gsm8k: 0.91
  kimik2.5:
    gsm8k: 0.90
  minimaxm2.5:
    gsm8k: 0.92
  qwen3.5:
    gsm8k: 0.94
"""


SERVED = "dsr1-fp8"


UPLOAD = ("meta_env.json", "results*.json", "sample*.jsonl")
"""The eval artifact's path patterns in the harness's workflow (files of the working folder)."""


CONC_SUFFIX = re.compile(r"_conc(\d+)(?:_\d+)?\.json$")


def job_env(port: int, **extra: str) -> dict[str, str]:
    """Only the benchmark harness's job variables (and evalgate on PATH)."""
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/root"),
        "MODEL": "deepseek-ai/DeepSeek-R1",
        "MODEL_NAME": SERVED,
        "MODEL_PREFIX": "dsr1",
        "ISL": "1024",
        "OSL": "1024",
        "FRAMEWORK": "sglang",
        "PRECISION": "fp8",
        "RUNNER_TYPE": "b200",
        "PREFILL_TP": "4",
        "PREFILL_EP": "4",
        "PREFILL_DP_ATTN": "true",
        "PREFILL_NUM_WORKERS": "1",
        "DECODE_TP": "8",
        "DECODE_EP": "8",
        "DECODE_DP_ATTN": "false",
        "DECODE_NUM_WORKERS": "2",
        "EVAL_CONC": "4 8",
        "PORT": str(port),
        "EVAL_MAX_MODEL_LEN": "4096",
        "EVAL_LIMIT": "40",
        "EVALGATE_RETRY_WAIT_MIN": "0",
        "EVALGATE_RETRY_WAIT_MAX": "0",
    }
    env.update(extra)
    return env


def start_hook(env: dict[str, str], out: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "evalgate.cli",
            "hook",
            "--layout",
            "harness",
            "--output-dir",
            str(out),
            *args,
        ],
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def harness_hook(env: dict[str, str], out: Path, *args: str) -> tuple[int, str]:
    process = start_hook(env, out, *args)
    stdout, stderr = process.communicate(timeout=300)
    return process.returncode, stdout + stderr


def uploaded(folder: Path) -> list[str]:
    """The files the workflow's eval artifact takes from the job's working folder."""
    return sorted(
        p.name
        for p in folder.iterdir()
        if p.is_file() and any(fnmatch.fnmatch(p.name, pattern) for pattern in UPLOAD)
    )


def as_uploaded(job: Path, folder: Path) -> Path:
    """`folder`, made to hold what the workflow uploads from `job` (uploaded) and nothing else."""
    folder.mkdir()
    for name in uploaded(job):
        shutil.copy(job / name, folder / name)
    return folder


def collect_rows(root: Path) -> list[dict[str, Any]]:
    """The collector: folders (root, its direct subfolders) holding a meta_env.json; in each,
    the *.json files carrying lm_eval_version; a batch gives one row per completed _conc<N>."""
    rows = []
    sets = [root] if (root / "meta_env.json").exists() else []
    sets += [d for d in root.iterdir() if d.is_dir() and (d / "meta_env.json").exists()]
    for folder in sets:
        meta = json.loads((folder / "meta_env.json").read_text())
        completed = set(meta.get("completed_eval_concs", meta.get("eval_concs", [])))
        for path in sorted(folder.glob("*.json")):
            doc = json.loads(path.read_text())
            if path.name == "meta_env.json" or "lm_eval_version" not in doc:
                continue
            match = CONC_SUFFIX.search(path.name)
            if match is None or int(match.group(1)) not in completed:
                continue
            for task, metrics in doc["results"].items():
                rows.append(
                    {
                        "model_prefix": meta.get("infmax_model_prefix", "unknown"),
                        "hw": meta.get("hw", "unknown").upper(),
                        "framework": meta.get("framework"),
                        "precision": meta.get("precision"),
                        "isl": int(meta.get("isl", 0)),
                        "osl": int(meta.get("osl", 0)),
                        "conc": int(match.group(1)),
                        "prefill": (
                            meta["prefill_tp"],
                            meta["prefill_ep"],
                            meta["prefill_dp_attention"],
                            meta["prefill_num_workers"],
                        ),
                        "decode": (
                            meta["decode_tp"],
                            meta["decode_ep"],
                            meta["decode_dp_attention"],
                            meta["decode_num_workers"],
                        ),
                        "dp_attention": meta["dp_attention"],
                        "task": task,
                        "strict": metrics.get("exact_match,strict-match"),
                        "flexible": metrics.get("exact_match,flexible-extract"),
                        "n": doc["n-samples"][task]["effective"],
                        "model": doc.get("model_name") or meta.get("model"),
                    }
                )
    return rows


def validate(folder: Path, thresholds: dict[str, Any], expected: list[int]) -> list[str]:
    """The validator: its FAIL lines (empty: it passes)."""
    meta = json.loads((folder / "meta_env.json").read_text())
    failures = []
    if set(meta["eval_concs"]) != set(expected):
        failures.append("batched eval metadata does not match workflow concurrencies")
    if meta["failed_eval_concs"]:
        failures.append(
            "batched eval failed for concurrency: " + ", ".join(map(str, meta["failed_eval_concs"]))
        )
    files = sorted(folder.glob("results*.json"))
    staged = {int(m.group(1)) for p in files if (m := CONC_SUFFIX.search(p.name))}
    if missing := sorted(set(expected) - staged):
        failures.append("batched eval is missing result files for concurrency: " + str(missing))
    prefix = meta.get("infmax_model_prefix")
    checked = 0
    for path in files:
        for task, metrics in json.loads(path.read_text())["results"].items():
            floor = thresholds["models"].get(prefix, {}).get(task)
            floor = floor if floor is not None else thresholds["default"].get(task, 0.85)
            for name, value in metrics.items():
                if name.startswith("exact_match,") and "stderr" not in name:
                    checked += 1
                    if value < floor:
                        failures.append(f"{path.name} {task} {name} = {value:.4f} (< {floor})")
    if checked == 0:
        failures.append("no metrics matched prefix 'exact_match,'")
    return failures


def harness_thresholds() -> dict[str, Any]:
    import yaml

    return dict(yaml.safe_load(HARNESS_YAML))


def set_job(monkeypatch: pytest.MonkeyPatch, port: int, **variables: str) -> None:
    """The job's environment: the harness's variables for a single-node dsr1 row."""
    job = {
        "MODEL": "deepseek-ai/DeepSeek-R1",
        "MODEL_NAME": SERVED,
        "MODEL_PREFIX": "dsr1",
        "FRAMEWORK": "sglang",
        "PRECISION": "fp8",
        "RUNNER_TYPE": "b200",
        "PORT": str(port),
        "EVAL_CONC": "4",
        "EVAL_LIMIT": "40",
        "IS_MULTINODE": "false",
        **variables,
    }
    for name, value in job.items():
        monkeypatch.setenv(name, value)


def cli_hook(cli: Any, out: Path, *args: str) -> Any:
    return cli("hook", "--output-dir", str(out), *FAST, *args)


# The benchmark harness's utils/evals/thresholds.yaml as it is (REFERENCE.md §5).
