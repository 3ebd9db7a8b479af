"""Live scoring of one answer: the task file's filters and exact_match, through lm-eval's code."""

from __future__ import annotations

import json

import pytest

from evalgate.eval.stage import AnswerScorer, gated_filters
from evalgate.tasks.spec import load_task
from tests.fakeengine import GSM8K_TEST

pytestmark = pytest.mark.unit

DOC = json.loads(GSM8K_TEST.read_text(encoding="utf-8").splitlines()[0])  # answer: 18


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_the_gated_filters_are_the_task_files(api):
    assert gated_filters(load_task(api)) == ("strict-match", "flexible-extract")


@pytest.mark.parametrize(
    ("response", "strict", "flexible"),
    [
        ("She sells 16 - 3 - 4 = 9 eggs, 9 * 2 = 18.\n#### 18", True, True),
        ("#### 18.", True, True),  # a trailing period is ignored
        ("#### $18", False, True),  # strict-match wants a number right after '#### '
        ("So she makes 18 dollars.", False, True),  # flexible reads the last number
        ("#### 18\nQuestion: next one, 5 apples", True, False),  # ... the last one here is 5
        ("#### 19", False, False),
        ("", False, False),
        ("#### 1,8", True, True),  # commas are ignored on both sides
    ],
)
def test_answers_are_scored_as_lm_eval_scores_them(response, strict, flexible):
    scorer = AnswerScorer(load_task("chat"))
    assert scorer(DOC, response) == {"strict-match": strict, "flexible-extract": flexible}
