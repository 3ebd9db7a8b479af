"""How long `evalgate compare` takes on full GSM8K (1319 questions, two filters).

    PYTHONPATH=. python benchmarks/bench_compare.py [repeats]

Builds two run folders (40 answers lost, 5 gained) in a temporary folder, then reports the
median wall time of the library call (`compare_runs` plus rendering) and of the whole CLI as a
subprocess (interpreter start and imports included).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from evalgate.compare.comparison import compare_runs
from evalgate.compare.views import comparison_document, render_text
from evalgate.tasks.dataset import bundled_dir

# Until `compare` is in evalgate.cli.SUBCOMMANDS, register it for this process only.
CLI = (
    "import sys; from evalgate import cli; "
    "cli.SUBCOMMANDS = tuple(dict.fromkeys((*cli.SUBCOMMANDS, 'compare'))); "
    "sys.exit(cli.main(sys.argv[1:]))"
)


def write_run(folder: Path, correct: list[bool]) -> None:
    rows = [json.loads(line) for line in (bundled_dir() / "test.jsonl").read_text().splitlines()]
    folder.mkdir()
    samples = []
    for doc_id, (row, right) in enumerate(zip(rows, correct, strict=True)):
        target = row["answer"].split("####")[-1].strip()
        answer = {"extracted": target if right else "0", "correct": right}
        samples.append(
            {
                "doc_id": doc_id,
                "question": row["question"],
                "target": target,
                "prompt_sha256": f"{doc_id:064x}",
                "response": f"#### {target}",
                "finish_reason": "stop",
                "completion_tokens": 40,
                "error": None,
                "filters": {"strict-match": answer, "flexible-extract": answer},
            }
        )
    result = {
        "schema": "evalgate.result/1",
        "evalgate_version": "0.1.0",
        "run_id": folder.name,
        "status": "pass",
        "stage": "done",
        "reason": "",
        "exit_code": 0,
        "started_at": "2026-01-01T00:00:00Z",
        "finished_at": None,
        "timings": {},
        "model": "m",
        "labels": {},
        "warnings": [],
        "scores": [],
        "checks": [],
        "eval": {
            "task": "gsm8k",
            "api": "chat",
            "num_fewshot": 5,
            "max_tokens": 1024,
            "dataset": {"source": "bundled", "sha256": {"test": "x"}},
            "requests": {"total": 1319, "completed": 1319, "failed": 0, "truncated": 0, "empty": 0},
        },
    }
    (folder / "result.json").write_text(json.dumps(result))
    (folder / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))


def median_seconds(action, repeats: int) -> float:
    timings = []
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        timings.append(time.perf_counter() - start)
    return statistics.median(timings)


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    shared = [i % 5 != 0 for i in range(1319 - 45)]
    with tempfile.TemporaryDirectory() as tmp:
        base, cand = Path(tmp, "bf16"), Path(tmp, "fp8")
        write_run(base, [True] * 40 + [False] * 5 + shared)
        write_run(cand, [False] * 40 + [True] * 5 + shared)

        def library() -> None:
            comparison = compare_runs(base, cand, max_drop=0.02, allow_protocol_drift=False)
            render_text(comparison)
            comparison_document(comparison)

        def command() -> None:
            subprocess.run(
                [sys.executable, "-c", CLI, "compare", str(base), str(cand)],
                capture_output=True,
                check=False,
            )

        library()
        print(
            f"library compare_runs + render, 1319 x 2 filters: "
            f"median {median_seconds(library, repeats) * 1000:.0f} ms over {repeats} runs"
        )
        print(
            f"CLI subprocess `evalgate compare`:                "
            f"median {median_seconds(command, repeats) * 1000:.0f} ms over {repeats} runs"
        )


if __name__ == "__main__":
    main()
