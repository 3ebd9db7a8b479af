"""Thinking written into the answer: which part is scored, and whether the budget cut it.

A reasoning model served without a reasoning parser writes its thinking into the answer itself:
``<think> … </think>`` and then the answer (a chat template that opens the block in the prompt
leaves only the ``</think>``). lm-eval 0.4.13, and the benchmark harness's pinned lm-eval, score
the whole text, so numbers in the scratchpad count as answers; lm-eval's main branch drops the
text up to the end-of-thinking marker (its ``think_end_token``). evalgate scores the text after
the last end marker. An answer that opened its thinking and never ended it has no answer: it scores
nothing (an answer cut there would otherwise pass on its scratchpad), and, ended by length, it
counts as cut while thinking, as an answer whose separate reasoning field ran out does.

An answer whose template opened the block in the prompt and that was cut before ``</think>``
carries neither marker: nothing in it tells it from a plain answer cut short, so it is counted
as truncated only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


class Split(NamedTuple):
    """One answer taken apart: the text to score, and the thinking written before it."""

    answer: str
    thinking: str | None
    """The thinking, end marker included (None: the answer wrote none)."""
    ended: bool
    """Whether the thinking reached its end marker (True when there was none)."""


@dataclass(frozen=True)
class InlineThinking:
    """The markers of thinking written into the answer (--think-start-marker and
    --think-end-marker)."""

    start: str = "<think>"
    end: str = "</think>"

    def split(self, text: str) -> Split:
        """The text after the last end marker; no text at all when the thinking never ended."""
        if not self.end:  # scoring the whole answer, as the benchmark harness does
            return Split(text, None, ended=True)
        at = text.rfind(self.end)
        if at >= 0:
            cut = at + len(self.end)
            return Split(text[cut:], text[:cut], ended=True)
        if self.start and self.start in text:
            return Split("", text, ended=False)
        return Split(text, None, ended=True)
