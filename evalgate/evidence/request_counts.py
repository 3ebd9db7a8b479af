"""What happened to the eval's requests, as result.json counts them (eval.requests)."""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

from evalgate.evidence.fields import Amount, Count, Positive, Record


class TokenSpread(Record, kw_only=True, frozen=True):
    """Tokens per answer over the answers that reported them."""

    answers: Positive
    median: Amount
    p95: Amount
    max: Count


class RequestCounts(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):  # counted up
    """What happened to the eval's requests."""

    total: Count
    completed: Count
    failed: Count
    retried: Count = 0
    truncated: Count
    empty: Count
    resumed: Count = 0
    from_reasoning: Annotated[
        Count, Meta(description="Answers taken from the reasoning field (content null or empty)")
    ] = 0
    cut_while_thinking: Annotated[
        Count,
        Meta(
            description="Answers that ran out of the output budget while still thinking: no "
            "content, finish_reason length; or thinking written into the answer that never "
            "reached its end marker (also counted in truncated)"
        ),
    ] = 0
    inline_thinking: Annotated[
        Count,
        Meta(
            description="Answers that wrote their thinking into the answer (<think>...</think>, "
            "no reasoning parser): only the text after the end marker was scored"
        ),
    ] = 0
    reasoning_tokens: Annotated[
        TokenSpread | None,
        Meta(description="Reasoning tokens per answer, where the engine reports them (null: none)"),
    ] = None

    @classmethod
    def zero(cls) -> RequestCounts:
        return cls(total=0, completed=0, failed=0, truncated=0, empty=0)
