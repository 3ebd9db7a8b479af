"""The gate stage of a run: the run-level problems beside the scores, and with --baseline the
comparison, that the one gate rule (gate/verdict.py) weighs with them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from msgspec import structs

from evalgate.errors import EvalgateError, ExitCode
from evalgate.evidence import artifacts
from evalgate.evidence.model import RequestCounts, Sample, Status, to_document
from evalgate.gate.runlog import RunLog, build_result
from evalgate.settings.gate import GateSettings

if TYPE_CHECKING:
    from evalgate.compare.comparison import Comparison
    from evalgate.compare.runs import Run


def problems(
    run: RunLog, gate: GateSettings, notes: list[str], *, failures_allowed: int
) -> list[str]:
    """The run-level problems besides the scores (too many truncated answers); the warnings
    about failed (`failures_allowed`: --max-failed-requests), truncated and cut-while-thinking
    answers, and the dispatch's `notes`, added to the run's."""
    counts = run.eval.requests if run.eval else RequestCounts.zero()
    if counts.failed:
        run.warnings.append(
            f"{counts.failed} request(s) failed and were scored as wrong "
            f"(allowed by --max-failed-requests {failures_allowed})"
        )
    stopped = run.eval and run.eval.early_stop and run.eval.early_stop.stopped
    answered = counts.completed if stopped else counts.total
    truncated_rate = (counts.truncated + counts.empty) / max(answered, 1)
    if counts.truncated or counts.empty:
        run.warnings.append(
            f"{counts.truncated} answer(s) ended by length and {counts.empty} "
            f"came back empty ({truncated_rate:.1%} of {answered})"
        )
    run.warnings += notes
    if counts.cut_while_thinking:
        run.warnings.append(thinking_warning(counts, run.eval.max_tokens if run.eval else 0))
    if truncated_rate > gate.max_truncated_rate:
        return [
            f"{truncated_rate:.1%} of answers were truncated or empty, over "
            f"--max-truncated-rate {gate.max_truncated_rate:.1%}"
        ]
    return []


def compare_baseline(
    run: RunLog, out: Path, baseline: Run, *, path: Path, max_drop: float, samples: list[Sample]
) -> tuple[Comparison, list[str], list[str]]:
    """Pair this run with the baseline read from `path`: the comparison, its problems and its
    doubts (both empty when the two are equivalent). The comparison is one of the verdict's
    inputs, so the run has none yet: record_comparison writes it once the verdict is reached."""
    from evalgate.compare.comparison import compare_runs
    from evalgate.compare.runs import evaluated_run

    provisional = build_result(run, status="running", reason="comparing", exit_code=0)
    candidate = evaluated_run(out / artifacts.RESULT_NAME, provisional, samples)
    try:
        comparison = compare_runs(baseline, candidate, max_drop=max_drop)
    except EvalgateError as exc:
        raise type(exc)(f"comparison with {path} refused: {exc.message}") from exc
    if comparison.exit_code == ExitCode.FAIL:
        return comparison, [f"regression against the baseline {path}: {comparison.reason}"], []
    if comparison.exit_code == ExitCode.INCONCLUSIVE:
        doubt = f"the comparison with the baseline is inconclusive: {comparison.reason}"
        return comparison, [], [doubt]
    return comparison, [], []


def record_comparison(run: RunLog, out: Path, comparison: Comparison, status: Status) -> str:
    """Write comparison.json with the candidate's status as its verdict made it; compare's
    report as text."""
    from evalgate.compare.views import comparison_document, render_text

    candidate = structs.replace(comparison.candidate, status=status)
    comparison = structs.replace(comparison, candidate=candidate)
    document = to_document(comparison_document(comparison))
    artifacts.write_json(out / artifacts.COMPARISON_NAME, document)
    run.files["comparison"] = artifacts.COMPARISON_NAME
    return render_text(comparison)


def thinking_warning(counts: RequestCounts, budget: int) -> str:
    """How many answers the budget cut while the model was still thinking, and the budget to
    try instead (they needed more than the whole budget: the next step is twice it)."""
    cut = counts.cut_while_thinking
    how = "no content, finish_reason length; scored from their reasoning"
    if counts.inline_thinking:  # thinking written into the answer: cut there, no answer
        how = (
            "thinking written into the answer, finish_reason length before its end marker; "
            "scored as no answer"
            if not counts.from_reasoning
            else "finish_reason length before their thinking ended; scored from their "
            "reasoning field, or as no answer where the thinking was written into the answer"
        )
    return (
        f"{cut} answer(s) ran out of the {budget}-token budget while still thinking "
        f"({cut / max(counts.total, 1):.1%} of {counts.total}: {how}): holding them takes a "
        "budget above "
        f"{budget} tokens, e.g. --max-tokens {2 * budget} with a context that fits it, or less "
        "thinking (--reasoning-effort, --chat-template-kwargs)"
    )
