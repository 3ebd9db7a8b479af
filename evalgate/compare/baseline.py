"""A run's --baseline, checked before the eval: the comparison it asks for must be possible.

Found only after the eval, a missing baseline or one measured another way would cost the whole
eval and then turn its verdict into exit 2. The protocol fields a run knows before it sends a
request (task, API, few-shot, temperature, questions, data set) are compared here; the budget,
known only after the probe, is compared with the rest after the eval.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalgate.compare.runs import Run, show
from evalgate.errors import UsageError

KNOWN_BEFORE_THE_EVAL = (
    "task",
    "task_sha256",
    "api",
    "num_fewshot",
    "fewshot_seed",
    "temperature",
    "limit",
)


def refuse_overlap(baseline: Path, output_dir: Path) -> None:
    """--baseline in --output-dir: this run would write over the run it compares with."""
    folder = baseline.parent if baseline.name == "result.json" else baseline
    if folder.resolve() == output_dir.resolve():
        raise UsageError(
            f"--baseline {baseline} is this run's --output-dir {output_dir}: the run would "
            "write over the run it compares with. Choose another --output-dir."
        )


def check_baseline(baseline: Run, path: Path, planned: dict[str, Any]) -> None:
    """Compare the protocol this run will use with the loaded baseline's; raise UsageError
    (exit 2) naming each difference."""
    recorded = baseline.eval
    differences = [
        f"{name}: baseline {show(getattr(recorded, name))}, this run {show(planned[name])}"
        for name in KNOWN_BEFORE_THE_EVAL
        if name in planned and getattr(recorded, name) != planned[name]
    ]
    sha = planned.get("dataset_sha256")
    if sha is not None and recorded.dataset.sha256 != sha:
        differences.append("dataset: the GSM8K files differ (sha256)")
    if differences:
        raise UsageError(
            f"--baseline {path} was not measured the same way as this run, so the comparison "
            "would be refused after the whole eval: " + "; ".join(differences) + ". Run with "
            "the baseline's settings, or choose another --baseline."
        )
