"""hook.json: which concurrencies of an `evalgate hook` call completed, and why the others did
not."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from evalgate.evidence.fields import Count, HookStatus, Positive, Record


class HookRun(Record, kw_only=True, frozen=True):
    """One concurrency of a hook call."""

    concurrency: Positive
    status: HookStatus
    reason: str
    exit_code: Count | None = None
    stage: str | None = None
    result: str | None = None


class HookSummary(Record, kw_only=True, frozen=True):
    """hook.json: which concurrencies completed, and why the others did not."""

    concurrencies: list[Positive]
    completed: list[Positive]
    runs: list[HookRun]
    stopped: Annotated[
        str | None, Meta(description="Why the hook stopped before running every concurrency")
    ]
