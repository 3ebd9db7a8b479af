"""A run's --baseline, checked before the eval: the comparison it asks for must be possible.

Found only after the eval, a missing baseline or one measured another way would cost the whole
eval and then turn its verdict into exit 2. The run's protocol is compared here by the rule
`evalgate compare` applies (compare.runs.eval_differences), all but the budget: known only after
the probe, it is compared with the rest after the eval.
"""

from __future__ import annotations

from pathlib import Path

from evalgate.compare.runs import Run, eval_differences
from evalgate.errors import UsageError
from evalgate.evidence.model import Protocol


def refuse_overlap(baseline: Path, output_dir: Path) -> None:
    """--baseline in --output-dir: this run would write over the run it compares with."""
    folder = baseline.parent if baseline.name == "result.json" else baseline
    if folder.resolve() == output_dir.resolve():
        raise UsageError(
            f"--baseline {baseline} is this run's --output-dir {output_dir}: the run would "
            "write over the run it compares with. Choose another --output-dir."
        )


def check_baseline(baseline: Run, path: Path, planned: Protocol) -> None:
    """Compare the protocol this run will use with the loaded baseline's; raise UsageError
    (exit 2) naming each difference."""
    differences = [d.describe("this run") for d in eval_differences(baseline.eval, planned)]
    if differences:
        raise UsageError(
            f"--baseline {path} was not measured the same way as this run, so the comparison "
            "would be refused after the whole eval: " + "; ".join(differences) + ". Run with "
            "the baseline's settings, or choose another --baseline."
        )
