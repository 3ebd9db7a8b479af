"""The eval's requests on the dispatch's event loop: at most --num-concurrent in flight, an
answer the journal kept used instead of a request, each answer recorded (replies.py) and, with
a sequential test, read in dispatch order; nothing more is sent once the test is certain or a
failure stops the eval."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from evalgate.engine.client import EvalClient, RequestFailed
from evalgate.evidence.journal import body_key
from evalgate.evidence.model import Reply
from evalgate.gate.replies import OverBudget, Replies
from evalgate.rules.sequential import PrefixReader

log = logging.getLogger(__name__)
Progress = Callable[[int, int], None]
Scorer = Callable[[dict[str, Any], str], dict[str, bool]]


@dataclass(frozen=True)
class Request:
    """One generation request, ready to send."""

    doc_id: int
    body: dict[str, Any]
    key: str

    @classmethod
    def of(cls, doc_id: int, body: dict[str, Any]) -> Request:
        return cls(doc_id, body, body_key(body))


@dataclass
class Sending:
    """One sending of an eval's requests."""

    replies: Replies
    num_concurrent: int
    resumed: dict[str, Reply]
    progress: Progress | None
    reader: PrefixReader | None
    asked: int = 0
    """Questions sent to the engine, or answered from the journal."""

    async def _one(
        self, client: EvalClient, semaphore: asyncio.Semaphore, request: Request
    ) -> tuple[bool, str | None]:
        """(whether it was answered or failed, the text): from the journal or the engine; not
        sent when the sequential test was certain before a slot was free. A request counts as
        asked once its headers left: one cancelled while it connected never reached the engine."""
        kept = self.resumed.get(request.key)
        if kept is not None:
            self.asked += 1
            completion = self.replies.received(kept)
            return True, self.replies.record(request.doc_id, request.key, completion, resumed=True)
        counted = False

        def asked() -> None:
            nonlocal counted
            if not counted:
                counted = True
                self.asked += 1

        async with semaphore:
            if self.reader is not None and self.reader.decision is not None:
                return False, None  # certain while this one waited for a slot: never sent
            try:
                answer = await client.complete(request.body, on_sent=asked)
            except RequestFailed as failure:
                asked()
                self.replies.fail(request.doc_id, request.key, failure)
                return True, None
            asked()
        return True, self.replies.record(request.doc_id, request.key, answer, resumed=False)

    async def send_all(
        self,
        client: EvalClient,
        prepared: list[Request],
        order: list[int],
        docs: list[dict[str, Any]],
        scorer: Scorer | None,
    ) -> list[str]:
        """Every request sent in `order` (or read from the journal); the texts in their order.
        `docs` and `scorer`: each answer scored for the sequential test as it arrives."""
        results: list[str] = [""] * len(prepared)
        semaphore = asyncio.Semaphore(self.num_concurrent)
        done = 0

        async def one(position: int, index: int) -> None:
            nonlocal done
            ended, text = await self._one(client, semaphore, prepared[index])
            if not ended:
                return
            if text is not None:
                results[index] = text
            if docs and self.reader is not None and scorer is not None:  # None: it failed
                self.reader.arrive(position, None if text is None else scorer(docs[index], text))
            done += 1
            if self.progress is not None:
                self.progress(done, len(prepared))

        tasks = [asyncio.create_task(one(position, index)) for position, index in enumerate(order)]
        over: OverBudget | None = None
        try:
            for finished in asyncio.as_completed(tasks):
                await finished  # the first fatal error propagates from here
                if self.reader is not None and self.reader.decision is not None:
                    log.info(
                        "the sequential test is certain after %d answers: %d questions sent",
                        self.reader.decision.n,
                        self.asked,
                    )
                    break  # nothing more is sent; what is in flight is cancelled below
        except OverBudget as first:
            over = first
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self.replies.counts.retried = client.retried
            self.replies.engine_notes = client.problems.describe()
            await client.close()
        if over is not None:
            raise self.replies.over_budget(over)
        return results
