"""Time `evalgate verify` over synthetic sweeps of N artifacts (issue 27: 10,000 in at most 1.5 s,
100,000 in at most 20 s and 250 MB).

    python benchmarks/bench_verify.py                 # N = 10,000 and 100,000, 5 runs each
    python benchmarks/bench_verify.py --sizes 10000 --runs 3

Each N gets a fresh temporary tree: one folder per config holding a schema-valid result.json
and a small samples.jsonl, plus (--harness-share) harness folders with meta_env.json and an
lm-eval results_*.json. Every config passes, so the run walks the whole happy path: read,
validate, resolve the threshold, gate, print the table. `evalgate verify` runs as a subprocess
(the real console entry point, `python -m evalgate.cli`, and --entry standalone: only the verify
subcommand's own modules); the median, min and max wall time of the runs, the median CPU time
(user + system: what the machine's other load cannot inflate much) and the peak RSS of the
children are printed. The file cache is warm (the tree was just written).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PREFIXES = ("dsr1", "gptoss", "qwen3.5", "kimik2.5", "glm5", "minimaxm2.5")
HARDWARE = ("b200", "h200", "mi355x", "gb200")
STANDALONE = (
    "import argparse, sys\n"
    "from evalgate.cli import verify as cli_verify\n"
    "parser = argparse.ArgumentParser()\n"
    "cli_verify.add_arguments(parser)\n"
    "sys.exit(cli_verify.command(parser.parse_args(sys.argv[1:])))\n"
)


ENDPOINT = {
    "base_url": "http://127.0.0.1:8000/v1",
    "api": "chat",
    "worker_urls": [],
    "engine": {"owned_by": "vllm", "version": "0.32.0", "model_root": None},
}
CONTEXT = {
    "eval_max_model_len": 2304,
    "max_tokens": 1800,
    "budget_policy": "fit",
    "requested": None,
    "native": {"value": 163840, "source": "config.json"},
    "served": [{"value": 2304, "source": "/v1/models"}],
    "prompt_tokens": {"value": 480, "source": "/tokenize"},
    "steps": ["ISL + OSL + 256 = 2304", "served 2304 (/v1/models)"],
}
PROBE = {
    "outcome": "ok",
    "status_code": 200,
    "engine_message": None,
    "latency_s": 0.4,
    "prompt_tokens": 480,
    "max_tokens": 1800,
    "doc_id": 7,
}


def result_document(index: int) -> dict[str, object]:
    """A passing run's result.json: the `index`-th config of the sweep, its own model family,
    hardware and concurrency."""
    prefix = PREFIXES[index % len(PREFIXES)]
    scores = scores_of(0.95 + (index % 40) / 1000)
    return {
        "schema": "evalgate.result/1",
        "evalgate_version": "0.1.0",
        "run_id": f"run{index:08d}",
        "status": "pass",
        "stage": "done",
        "reason": "all exact_match scores clear 0.91",
        "error": None,
        "exit_code": 0,
        "started_at": "2026-05-01T10:00:00+00:00",
        "finished_at": "2026-05-01T10:20:00+00:00",
        "timings": {"context": 0.2, "probe": 0.4, "eval": 1180.5, "total": 1181.1},
        "model": f"org/{prefix}-model",
        "labels": {
            "model_prefix": prefix,
            "hardware": HARDWARE[index % len(HARDWARE)],
            "framework": "vllm",
            "precision": "fp8",
            "kv_cache_dtype": "fp8",
            "isl": 1024,
            "osl": 1024,
            "concurrency": index + 1,
            "topology": {"tp": 8, "ep": 1, "dp_attention": False},
        },
        "endpoint": ENDPOINT,
        "context": CONTEXT,
        "probe": PROBE,
        "eval": eval_record(index + 1),
        "scores": scores,
        "threshold": {"value": 0.91, "matched": f"prefix:{prefix}", "file": "thresholds.json"},
        "checks": [
            {
                "metric": "exact_match",
                "filter": s["filter"],
                "value": s["value"],
                "threshold": 0.91,
                "passed": True,
            }
            for s in scores
        ],
        "warnings": [],
        "files": {"samples": "samples.jsonl"},
    }


def scores_of(score: float) -> list[dict[str, object]]:
    """Both GSM8K filters at `score`, over the full test set."""
    return [
        {
            "task": "gsm8k_evalgate_chat",
            "metric": "exact_match",
            "filter": f,
            "value": score,
            "stderr": round((score * (1 - score) / 1318) ** 0.5, 6),
            "n": 1319,
        }
        for f in ("strict-match", "flexible-extract")
    ]


def eval_record(concurrency: int) -> dict[str, object]:
    """The eval stage of full GSM8K at `concurrency`, every request answered."""
    return {
        "task": "gsm8k_evalgate_chat",
        "api": "chat",
        "num_fewshot": 5,
        "fewshot_seed": 1234,
        "limit": None,
        "num_concurrent": concurrency,
        "max_tokens": 1800,
        "temperature": 0.0,
        "questions": 1319,
        "lm_eval_version": "0.4.13",
        "dataset": {"source": "bundled", "sha256": {"test.jsonl": "a", "train.jsonl": "b"}},
        "requests": {
            "total": 1319,
            "completed": 1319,
            "failed": 0,
            "retried": 0,
            "truncated": 0,
            "empty": 0,
        },
    }


def harness_files(index: int) -> tuple[dict[str, object], dict[str, object]]:
    meta = {
        "is_multinode": False,
        "framework": "sglang",
        "precision": "fp4",
        "spec_decoding": "",
        "tp": 4,
        "ep": 1,
        "dp_attention": False,
        "conc": index + 1,
        "model": "openai/gpt-oss",
        "infmax_model_prefix": "gptoss",
        "hw": "mi355x",
        "isl": "1024",
        "osl": "8192",
    }
    results = {
        "results": {
            "gsm8k": {
                "exact_match,strict-match": 0.95,
                "exact_match_stderr,strict-match": 0.006,
                "exact_match,flexible-extract": 0.95,
                "exact_match_stderr,flexible-extract": 0.006,
            }
        },
        "n-samples": {"gsm8k": {"original": 1319, "effective": 1319}},
        "lm_eval_version": "0.4.13",
    }
    return meta, results


def generate(root: Path, count: int, harness_share: float) -> None:
    harness = int(count * harness_share)
    for index in range(count):
        folder = root / f"eval-{index:06d}"
        folder.mkdir()
        if index < harness:
            meta, results = harness_files(index)
            (folder / "meta_env.json").write_text(json.dumps(meta))
            (folder / "results_2026-05-01T10-00-00.json").write_text(json.dumps(results))
        else:
            (folder / "result.json").write_text(json.dumps(result_document(index), indent=2))
            (folder / "samples.jsonl").write_text('{"doc_id": 0}\n')


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    env.pop("GITHUB_ACTIONS", None)
    return env


def registered() -> bool:
    """Whether `evalgate verify` is wired into the console entry point."""
    done = subprocess.run(
        [sys.executable, "-m", "evalgate.cli", "verify", "--help"],
        capture_output=True,
        env=_env(),
        check=False,
    )
    return done.returncode == 0


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_runs(command: list[str], runs: int) -> tuple[list[float], list[float]]:
    """(wall seconds, CPU seconds) of each run."""
    env = _env()
    walls, cpus = [], []
    for _ in range(runs):
        start, cpu = time.perf_counter(), _cpu()
        done = subprocess.run(
            command,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
            check=False,
            text=True,
        )
        walls.append(time.perf_counter() - start)
        cpus.append(_cpu() - cpu)
        if done.returncode != 0:
            sys.exit(f"evalgate verify exited {done.returncode}: {done.stderr.strip()}")
    return walls, cpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--harness-share",
        type=float,
        default=0.1,
        help="share of the artifacts in the harness's lm-eval format",
    )
    parser.add_argument("--entry", choices=("cli", "standalone", "both"), default="both")
    args = parser.parse_args()
    entries = {
        "cli": [sys.executable, "-m", "evalgate.cli", "verify"],
        "standalone": [sys.executable, "-c", STANDALONE],
    }
    chosen = list(entries) if args.entry == "both" else [args.entry]
    if "cli" in chosen and not registered():
        print(
            "note: `evalgate verify` is not in evalgate.cli.SUBCOMMANDS yet; timing the "
            "standalone entry only"
        )
        chosen = ["standalone"]
    print(
        f"{'N':>8}  {'entry':<10}  {'median s':>8}  {'min s':>6}  {'max s':>6}  "
        f"{'CPU s':>6}  {'peak RSS MiB':>12}"
    )
    for size in sorted(args.sizes):
        root = Path(tempfile.mkdtemp(prefix=f"evalgate-bench-{size}-"))
        try:
            generate(root, size, args.harness_share)
            for entry in chosen:
                times, cpus = time_runs([*entries[entry], str(root)], args.runs)
                peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
                print(
                    f"{size:>8}  {entry:<10}  {statistics.median(times):>8.3f}  "
                    f"{min(times):>6.3f}  {max(times):>6.3f}  {statistics.median(cpus):>6.3f}  "
                    f"{peak:>12.1f}",
                    flush=True,
                )
        finally:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
