"""--early-stop in a gate run: the run's sequential test, and what a run that stopped keeps
(docs/early-stop.md, "Read in dispatch order").
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING

from evalgate.errors import EvalFailedError
from evalgate.evidence.model import EarlyStopRecord, FilterEvidence
from evalgate.rules import sequential
from evalgate.rules.sequential import EarlyStop, SequentialTest

if TYPE_CHECKING:
    from evalgate.gate.dispatch import Dispatch
    from evalgate.gate.evaluate import Evaluation
    from evalgate.tasks.spec import TaskSpec

log = logging.getLogger(__name__)


def test(mode: EarlyStop, alpha: float, spec: TaskSpec, threshold: float) -> SequentialTest | None:
    """The run's sequential test, or None with --early-stop off."""
    if mode == "off":
        return None
    from evalgate.gate.scoring import gated_filters

    return SequentialTest(threshold, gated_filters(spec), mode=mode, alpha=alpha)


def _lm_eval_answers(
    evaluation: Evaluation, doc_ids: list[int], filters: tuple[str, ...]
) -> list[dict[str, bool] | None]:
    """Each question's verdict per filter as lm-eval scored it (None: no answer came)."""
    scored = {
        sample.doc_id: sample.filters for sample in evaluation.samples if sample.error is None
    }
    return [
        None
        if (found := scored.get(doc_id)) is None
        else {name: name in found and found[name].correct for name in filters}
        for doc_id in doc_ids
    ]


def settle(
    evaluation: Evaluation, sent: Dispatch, test: SequentialTest
) -> tuple[Evaluation, EarlyStopRecord]:
    """(the evaluation to keep, eval.early_stop): a stopped run keeps the questions it read."""
    from evalgate.gate.evaluate import prefix_result

    live = sent.reader.current() if sent.reader is not None else None
    questions = len(sent.dispatched)
    read = live.n if live is not None and live.outcome is not None else questions
    checked = sequential.replay(
        test, _lm_eval_answers(evaluation, sent.dispatched[:read], test.filters)
    )
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
