"""gate.evaluate: the scores read from lm-eval's results, and the GSM8K reference answer."""

from __future__ import annotations

import pytest

from evalgate.eval.lm_eval import extract_scores
from evalgate.evidence.model import Score
from evalgate.tasks.dataset import reference_answer

pytestmark = pytest.mark.unit

GSM8K = {
    "alias": "gsm8k_evalgate_chat",
    "exact_match,strict-match": 0.75,
    "exact_match_stderr,strict-match": 0.0125,
    "exact_match,flexible-extract": 0.8,
    "exact_match_stderr,flexible-extract": 0.012,
}
TASK = "gsm8k_evalgate_chat"


def score(flt: str, value: float, stderr: float | None) -> Score:
    return Score(task=TASK, metric="exact_match", filter=flt, value=value, stderr=stderr, n=8)


EXTRACTIONS = [
    # (case, lm-eval's results, scores)
    (
        "both filters with their stderr",
        {TASK: GSM8K},
        [
            score("strict-match", 0.75, 0.0125),
            score("flexible-extract", 0.8, 0.012),
        ],
    ),
    (
        "stderr N/A (one question)",
        {TASK: {"exact_match,strict-match": 1, "exact_match_stderr,strict-match": "N/A"}},
        [score("strict-match", 1.0, None)],
    ),
    (
        "a non-numeric value is no score",
        {TASK: {"exact_match,strict-match": "N/A", "exact_match,flexible-extract": 0.5}},
        [score("flexible-extract", 0.5, None)],
    ),
    (
        "alias, name and keys without a filter are not scores",
        {TASK: {"alias": "x", "name,x": "y", "samples": 8, "exact_match,strict-match": 0.0}},
        [score("strict-match", 0.0, None)],
    ),
    (
        "a filter name with a comma keeps it",
        {TASK: {"exact_match,strict,match": 0.25}},
        [score("strict,match", 0.25, None)],
    ),
    ("another task's results are not this task's", {"gsm8k": GSM8K}, []),
    ("no results", {}, []),
]


@pytest.mark.parametrize(
    ("results", "scores"), [c[1:] for c in EXTRACTIONS], ids=[c[0] for c in EXTRACTIONS]
)
def test_extract_scores(results, scores):
    assert list(extract_scores(TASK, results, 8)) == scores


@pytest.mark.parametrize(
    ("answer", "target"),
    [
        ("Natalia sold 48/2 = <<48/2=24>>24 clips.\n#### 72", "72"),
        ("It costs $1,200.\n#### 1,200", "1,200"),
        ("#### -3", "-3"),
        ("no marker", "no marker"),
        ("", ""),
    ],
)
def test_reference_answer(answer, target):
    assert reference_answer(answer) == target
