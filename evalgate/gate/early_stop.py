"""--early-stop in a gate run: the filters its sequential test reads, each answer scored the
moment it arrives as lm-eval will score it after the eval (the test needs each verdict while the
eval runs), and what a run that stopped keeps (docs/early-stop.md, "Read in dispatch order").
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any

from evalgate.errors import EvalFailedError
from evalgate.evidence.model import EarlyStopRecord, FilterEvidence
from evalgate.rules import sequential
from evalgate.rules.sequential import SequentialTest
from evalgate.rules.verdict import GATED_METRIC
from evalgate.tasks.spec import TaskSpec, render

if TYPE_CHECKING:
    from evalgate.gate.dispatch import Dispatch
    from evalgate.gate.evaluate import Evaluation

log = logging.getLogger(__name__)


def gated_filters(spec: TaskSpec) -> tuple[str, ...]:
    """The filters whose exact_match the gate reads, in the task file's order."""
    return tuple(str(entry["name"]) for entry in spec.config.get("filter_list", []))


class AnswerScorer:
    """Per filter: is this response right for this doc? (lm-eval's filters and exact_match.)"""

    def __init__(self, spec: TaskSpec) -> None:
        import lm_eval.filters  # noqa: F401 - importing it registers the filters
        from lm_eval.api.registry import get_filter, get_metric

        self._target = str(spec.config["doc_to_target"])
        self._pipelines = {
            str(entry["name"]): [
                get_filter(step["function"])(**{k: v for k, v in step.items() if k != "function"})
                for step in entry["filter"]
            ]
            for entry in spec.config.get("filter_list", [])
        }
        settings = next(m for m in spec.config["metric_list"] if m["metric"] == GATED_METRIC)
        self._metric = get_metric(GATED_METRIC)
        self._metric_kwargs = {
            key: value
            for key, value in settings.items()
            if key not in ("metric", "aggregation", "higher_is_better")
        }

    def __call__(self, doc: dict[str, Any], response: str) -> dict[str, bool]:
        """{filter: right} for one response."""
        gold = render(self._target, doc)
        found = {}
        for name, pipeline in self._pipelines.items():
            values: Any = [[response]]  # the filter's reading of the response
            for step in pipeline:
                values = list(step.apply(values, [doc]))
            score = self._metric(
                references=[gold], predictions=[str(values[0])], **self._metric_kwargs
            )
            found[name] = float(score[GATED_METRIC]) == 1.0
        return found


def settle(
    evaluation: Evaluation, sent: Dispatch, test: SequentialTest
) -> tuple[Evaluation, EarlyStopRecord]:
    """(the evaluation to keep, eval.early_stop): a stopped run keeps the questions it read."""
    from evalgate.gate.evaluate import prefix_result

    live = sent.reader.current() if sent.reader is not None else None
    questions = len(sent.dispatched)
    read = live.n if live is not None and live.outcome is not None else questions
    scored = {s.doc_id: s.filters for s in evaluation.samples if s.error is None}
    verdicts = [  # each question's per filter as lm-eval scored it (None: no answer came)
        None
        if (found := scored.get(doc_id)) is None
        else {name: name in found and found[name].correct for name in test.filters}
        for doc_id in sent.dispatched[:read]
    ]
    checked = sequential.replay(test, verdicts)
    if live is not None and (checked.outcome, checked.n) != (live.outcome, live.n):
        raise EvalFailedError(
            f"the early stop could not be confirmed: scoring each answer as it arrived gave "
            f"{live.outcome or 'no decision'} after {live.n} answers, lm-eval's scoring of the "
            f"same answers gives {checked.outcome or 'no decision'} after {checked.n}. This is "
            "an evalgate bug (please report it); rerun with --early-stop off."
        )
    kept = EarlyStopRecord(
        mode=test.mode,
        alpha=test.alpha,
        prior_weight=test.weight,
        order_seed=sequential.ORDER_SEED if test.active else None,
        stopped=checked.outcome is not None,
        decision=checked.outcome,
        questions=questions,
        questions_used=checked.n,
        questions_asked=sent.asked,
        filters=[
            FilterEvidence(
                filter=state.filter,
                right=state.right,
                n=state.n,
                e_value=None if math.isinf(state.e_value) else state.e_value,
                certain=state.certain,
            )
            for state in checked.filters
        ],
    )
    if checked.outcome is None:
        return evaluation, kept
    log.info("%s", checked.reason(test.threshold, questions, test.alpha))
    return prefix_result(evaluation, sent.dispatched[: checked.n]), kept
