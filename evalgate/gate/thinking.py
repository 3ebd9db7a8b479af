"""Thinking written into the answer: only the text after the last end marker is scored, lest the
scratchpad's numbers count as answers (docs/harness.md, "Where evalgate differs on purpose" (2)).
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
