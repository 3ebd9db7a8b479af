"""Each answer of the eval as it arrives: counted, held to the budget and the model asked, its
thinking written into it taken out, kept as a Reply in the journal; a failure counted, stopping
the eval where retrying cannot help.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import NamedTuple, cast

import msgspec

from evalgate import scrub
from evalgate.engine import answers as dynamo
from evalgate.engine.answers import REASONING_FIELDS, Completion
from evalgate.engine.wire import credentials_advice
from evalgate.errors import EvalFailedError, OverBudget, RequestFailed
from evalgate.evidence.journal import Journal
from evalgate.evidence.model import AnswerField, Reply, RequestCounts, TokenSpread

MAX_CHARS_PER_TOKEN = 64
"""An answer longer than this many characters per token of its budget cannot be one the engine
generated within max_tokens; it is cut before it is scored and stored."""


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
    --think-end-marker). Only the text after the last end marker is scored, lest the
    scratchpad's numbers count as answers (docs/harness.md, "Where evalgate differs on purpose"
    (2))."""

    start: str = "<think>"
    end: str = "</think>"

    def split(self, text: str) -> Split:
        """The text after the last end marker; no text at all when the thinking never ended."""
        if not self.end:  # scoring the whole answer, as the benchmark harness does
            return Split(text, None, ended=True)
        thought, end, answer = text.rpartition(self.end)
        if end:
            return Split(answer, thought + end, ended=True)
        if self.start and self.start in text:
            return Split("", text, ended=False)
        return Split(text, None, ended=True)


def spread(values: list[int]) -> TokenSpread | None:
    """Median, 95th percentile (nearest rank) and maximum; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(math.ceil(0.95 * len(ordered)), 1)
    return TokenSpread(
        answers=len(ordered),
        median=float(statistics.median(ordered)),
        p95=float(ordered[rank - 1]),
        max=ordered[-1],
    )


@dataclass
class Replies:
    """Records the eval's answers and failures: the counts result.json records, the journal,
    and what the warnings and the samples need besides."""

    model: str
    api: str
    max_tokens: int
    max_failed: int
    journal: Journal | None
    thinking: InlineThinking | None
    """The markers of thinking written into the answer (None: the whole answer is scored)."""
    counts: RequestCounts = field(default_factory=RequestCounts.zero, init=False)
    reasoning_tokens: list[int] = field(default_factory=list, init=False)
    answers: dict[int, Reply] = field(default_factory=dict, init=False)
    """The reply to each question, by doc_id."""
    filtered: int = field(default=0, init=False)
    """Answers stopped by the engine's content filter (also counted as truncated)."""
    oversized: int = field(default=0, init=False)
    """Answers longer than max_tokens allows, cut before scoring (also counted as truncated)."""
    other_models: Counter[str] = field(default_factory=Counter, init=False)
    """Answers naming a model other than the one requested, by the name they gave."""
    engine_notes: list[str] = field(default_factory=list, init=False)
    """Implausible values the engine's answers carried (not used)."""
    worker_gone: str | None = field(default=None, init=False)
    """What Dynamo's frontend said when the model's worker went away (engine.answers)."""

    def recorded(self) -> RequestCounts:
        """The counts as result.json records them."""
        return msgspec.structs.replace(self.counts, reasoning_tokens=spread(self.reasoning_tokens))

    @property
    def max_chars(self) -> int:
        """The longest answer kept: MAX_CHARS_PER_TOKEN per token of the budget."""
        return MAX_CHARS_PER_TOKEN * self.max_tokens

    def notes(self) -> list[str]:
        found = []
        if self.filtered:
            found.append(
                f"{self.filtered} answer(s) stopped by the engine's content filter "
                "(finish_reason content_filter)"
            )
        if self.oversized:
            found.append(
                f"{self.oversized} answer(s) were longer than max_tokens allows "
                f"({self.max_tokens}): cut to {self.max_chars} characters, counted as truncated"
            )
        found += [
            f"{count} answer(s) came from model {name!r}, not the requested {self.model!r}: "
            "check that --base-url reaches the engine serving it"
            for name, count in self.other_models.items()
        ]
        return found + self.engine_notes

    def record(self, doc_id: int, key: str, completion: Completion, *, resumed: bool) -> str:
        """Count and keep one answer; the text lm-eval scores. The answer is scored as the
        engine sent it, and kept scrubbed of the secrets, in full before it is cut to the
        budget (a cut first would keep the part of a secret before it)."""
        counts = self.counts
        counts.completed += 1
        counts.resumed += int(resumed)
        if len(completion.text) > self.max_chars:  # the engine ignored the budget
            self.oversized += 1
            if completion.finish_reason != "length":
                counts.truncated += 1
        if completion.model is not None and completion.model != self.model:
            self.other_models[completion.model] += 1
        sent = self._within_budget(completion)
        kept = self._within_budget(
            replace(
                completion,
                text=scrub.text(completion.text),
                reasoning=completion.reasoning and scrub.text(completion.reasoning),
            )
        )
        completion, unended = self._inline(sent)
        stored, _ = self._inline(kept)
        counts.inline_thinking += int(unended is not None)
        unended = bool(unended)
        length = completion.finish_reason == "length"
        self.filtered += int(completion.finish_reason == "content_filter")
        counts.truncated += int(length or completion.finish_reason == "content_filter")
        counts.empty += int(not completion.text.strip() and not (unended and length))
        thinking = completion.source in REASONING_FIELDS
        counts.from_reasoning += int(thinking)
        counts.cut_while_thinking += int((thinking or unended) and length)
        if completion.reasoning_tokens is not None:
            self.reasoning_tokens.append(completion.reasoning_tokens)
        reply = self.answers[doc_id] = Reply(
            doc_id=doc_id,
            prompt_sha256=key,
            response=stored.text,
            finish_reason=completion.finish_reason,
            completion_tokens=completion.completion_tokens,
            answer_field=cast(AnswerField, completion.source),  # the client names one of these
            reasoning=stored.reasoning,
            reasoning_tokens=completion.reasoning_tokens,
            error=None,
        )
        if self.journal is not None and not resumed:
            # as sent: a resumed answer is taken apart again
            self.journal.append(
                msgspec.structs.replace(reply, response=kept.text, reasoning=kept.reasoning)
            )
        return completion.text

    def _within_budget(self, completion: Completion) -> Completion:
        """The answer cut to max_chars (an engine that ignored the budget)."""
        if len(completion.text) <= self.max_chars:
            return completion
        return replace(completion, text=completion.text[: self.max_chars])

    def _inline(self, completion: Completion) -> tuple[Completion, bool | None]:
        """The answer with thinking written into it taken out (InlineThinking), kept as its
        reasoning; and whether that thinking never ended (None: it wrote none)."""
        if self.thinking is None or completion.source in REASONING_FIELDS:
            return completion, None
        answer, thought, ended = self.thinking.split(completion.text)
        if thought is None:
            return completion, None
        reasoning = completion.reasoning or thought
        return replace(completion, text=answer, reasoning=reasoning), not ended

    def received(self, kept: Reply) -> Completion:
        """A journal's reply as the completion it recorded (a journal from before the answer
        field was kept: the field the API answers in)."""
        return Completion(
            kept.response or "",
            kept.finish_reason,
            kept.completion_tokens,
            0,
            kept.answer_field or ("content" if self.api == "chat" else "text"),
            reasoning=kept.reasoning,
            reasoning_tokens=kept.reasoning_tokens,
        )

    def fail(self, doc_id: int, key: str, failure: RequestFailed) -> None:
        """Count a request that got no answer; raise where the eval must stop."""
        self.counts.failed += 1
        message = str(failure)
        self.answers[doc_id] = Reply(
            doc_id=doc_id, prompt_sha256=key, response=None, finish_reason=None, error=message
        )
        gone = dynamo.worker_gone(failure.error)
        self.worker_gone = gone or self.worker_gone
        if failure.fatal and gone is not None:
            raise EvalFailedError(
                f"{gone}: its worker went away during the eval, at question {doc_id}. "
                "Restart the worker (its log says why it stopped) and run the eval again."
            )
        if failure.fatal:
            fix = credentials_advice(failure.error) or (
                "Fix the request or the engine; the probe passed, so the prompt is unusual."
            )
            raise EvalFailedError(
                f"The engine rejected question {doc_id} ({message}). Retrying cannot "
                f"change this answer, so the eval stopped instead of sending the rest. {fix}"
            )
        if self.counts.failed > self.max_failed:
            raise OverBudget(doc_id, failure)

    def over_budget(self, first: OverBudget) -> EvalFailedError:
        """The error for failures over the budget, counted once every request in flight has
        ended: the same number result.json records."""
        workers = first.failure.unreachable_workers  # the router could not reach them
        gone = (
            f"The worker{'s' if len(workers) > 1 else ''} {', '.join(workers)} behind the "
            f"router {'are' if len(workers) > 1 else 'is'} unreachable: the engine went "
            "away during the eval. "
            if workers
            else ""
        )
        if not gone and self.worker_gone is not None:
            gone = f"{self.worker_gone}: its worker went away during the eval. "
        return EvalFailedError(
            f"{gone}{self.counts.failed} request(s) failed after {first.failure.attempts} "
            f"attempt(s) each (allowed: {self.max_failed}, --max-failed-requests); last: question "
            f"{first.doc_id}: {first.failure}. A failed request cannot be scored, so the run "
            "cannot be gated."
        )
