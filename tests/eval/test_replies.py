"""InlineThinking (evalgate.eval.replies): the part of an answer scored when its thinking is
written into it."""

from __future__ import annotations

import pytest

from evalgate.eval.replies import InlineThinking, Split

pytestmark = pytest.mark.unit


SPLITS = [
    # (case, markers, answer as sent, split)
    (
        "closed: only what follows the end marker",
        InlineThinking(),
        "<think>so #### 3</think> so #### 5",
        Split(" so #### 5", "<think>so #### 3</think>", ended=True),
    ),
    (
        "no opening marker (the template opened the block): what follows the end",
        InlineThinking(),
        "so #### 3\n</think>\n#### 5",
        Split("\n#### 5", "so #### 3\n</think>", ended=True),
    ),
    (
        "several end markers: after the last",
        InlineThinking(),
        "<think>a</think>b<think>c</think>#### 5",
        Split("#### 5", "<think>a</think>b<think>c</think>", ended=True),
    ),
    (
        "cut before the end marker: no answer at all",
        InlineThinking(),
        "<think>\nso far #### 3 and",
        Split("", "<think>\nso far #### 3 and", ended=False),
    ),
    ("no thinking: unchanged", InlineThinking(), "#### 5", Split("#### 5", None, ended=True)),
    (
        "no end marker set: the whole answer, as the harness scores it",
        InlineThinking(end=""),
        "<think>#### 3</think>#### 5",
        Split("<think>#### 3</think>#### 5", None, ended=True),
    ),
    (
        "no start marker set: an unended block is not recognised",
        InlineThinking(start=""),
        "<think>#### 3",
        Split("<think>#### 3", None, ended=True),
    ),
    (
        "other markers",
        InlineThinking("<|begin_of_thought|>", "<|end_of_thought|>"),
        "<|begin_of_thought|>#### 3<|end_of_thought|>#### 5",
        Split("#### 5", "<|begin_of_thought|>#### 3<|end_of_thought|>", ended=True),
    ),
]


@pytest.mark.parametrize(
    ("markers", "text", "expected"), [c[1:] for c in SPLITS], ids=[c[0] for c in SPLITS]
)
def test_split(markers, text, expected):
    assert markers.split(text) == expected
