"""The eval's requests, on a thread of their own: at most --num-concurrent in flight, an answer
the journal kept used instead of a request, each answer recorded (replies.py) and, with a
sequential test, read in dispatch order; nothing more is sent once the test is certain or a
failure stops the eval. When it starts and how lm-eval's requests are served from it:
docs/architecture.md, "evalgate run"; with --early-stop: docs/early-stop.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from evalgate.engine.client import EvalClient
from evalgate.errors import OverBudget, RequestFailed
from evalgate.eval.replies import Replies
from evalgate.evidence.journal import body_key
from evalgate.evidence.model import Reply
from evalgate.gate.sequential import PrefixReader, SequentialTest, dispatch_order

log = logging.getLogger(__name__)
HALT_WAIT_S = 30.0
"""How long halting waits for the requests in flight to be cancelled and the client closed."""
_LIVE: weakref.WeakSet[Dispatch] = weakref.WeakSet()
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Request:
    """One generation request, ready to send."""

    doc_id: int
    body: dict[str, Any]
    key: str
    doc: dict[str, Any] | None
    """The question lm-eval asks, for the sequential test's scoring (None: evalgate's own)."""

    @classmethod
    def of(cls, doc_id: int, body: dict[str, Any], doc: dict[str, Any] | None = None) -> Request:
        return cls(doc_id, body, body_key(body), doc)


def stop_all(reason: str) -> None:
    """A stop signal arrived: every dispatch under way sends nothing more, and its `wait`
    raises KeyboardInterrupt(reason), wherever the main thread was when the signal came (a
    KeyboardInterrupt raised inside a library that swallows it is not lost). Safe to call from
    a signal handler: it only schedules the cancellation."""
    for dispatch in list(_LIVE):
        dispatch.stop(reason)


@dataclass(eq=False, kw_only=True)  # eq=False: hashed by identity, for the live set
class Dispatch:
    """Sends one eval's requests and records their answers (see the module's docstring)."""

    client_factory: Callable[[], EvalClient]
    replies: Replies
    """Counts and keeps the answers; its model, API and budget are the requests' too."""
    num_concurrent: int
    resumed: dict[str, Reply] = field(default_factory=dict)
    progress: Progress | None = None
    sequential: SequentialTest | None = None
    scorer: Callable[[dict[str, Any], str], dict[str, bool]] | None = None
    """Scores each answer as it arrives, for the sequential test (set once lm-eval loaded)."""
    reader: PrefixReader | None = field(default=None, init=False)
    dispatched: list[int] = field(default_factory=list, init=False)
    """doc_ids in the order they were (to be) sent."""
    asked: int = field(default=0, init=False)
    """Questions sent to the engine, or answered from the journal."""
    warnings: list[str] = field(default_factory=list, init=False)
    _keys: list[str] = field(default_factory=list, init=False)
    _thread: threading.Thread | None = field(default=None, init=False)
    _loop: asyncio.AbstractEventLoop | None = field(default=None, init=False)
    _main: asyncio.Task[Any] | None = field(default=None, init=False)
    _outcome: list[str] | BaseException | None = field(default=None, init=False)
    _stopped: str | None = field(default=None, init=False)

    def start(self, requests: Sequence[Request]) -> None:
        """Begin sending `requests` (in a seeded order with a sequential test); `answers` or
        `wait` returns what came back."""
        order = list(range(len(requests)))
        if self.sequential is not None and self.sequential.active:
            order = dispatch_order(len(requests))
            self.reader = PrefixReader(self.sequential)
        self.replies.counts.total = len(requests)
        self.dispatched = [requests[i].doc_id for i in order]
        self._keys = [r.key for r in requests]
        started = threading.Event()

        async def run() -> list[str]:
            self._loop = asyncio.get_running_loop()
            self._main = asyncio.current_task()
            started.set()
            return await self._send_all(requests, order)

        def thread() -> None:
            try:
                self._outcome = asyncio.run(run())
            except BaseException as exc:
                self._outcome = exc
            finally:
                started.set()

        self._thread = threading.Thread(target=thread, name="evalgate-dispatch", daemon=True)
        _LIVE.add(self)
        self._thread.start()
        started.wait()

    def answers(self, requests: Sequence[Request]) -> list[str]:
        """The answers to `requests`, in their order: from the dispatch under way when it is
        sending exactly these bodies, else from one started now."""
        if self._thread is not None:
            if self._keys == [r.key for r in requests]:
                log.info(
                    "lm-eval asked for the %d requests under way since the probe passed "
                    "(%d sent, %d answered before it asked)",
                    len(requests),
                    self.asked,
                    self.replies.counts.completed + self.replies.counts.failed,
                )
                return self.wait()
            self._discard(requests)
        self.start(requests)
        return self.wait()

    def wait(self) -> list[str]:
        """Block until every answer is in (or the eval stopped); re-raise what stopped it."""
        if self._thread is None:
            raise RuntimeError("nothing was dispatched")
        try:
            self._thread.join()
        except BaseException:  # Ctrl-C or a stop signal, raised in this (the main) thread
            self.halt()
            raise
        if self._stopped is not None:
            raise KeyboardInterrupt(self._stopped)
        outcome = self._outcome
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome or []

    def stop(self, reason: str) -> None:
        """Send nothing more and cancel what is in flight, without waiting; `wait` then
        raises KeyboardInterrupt(reason)."""
        self._stopped = reason
        self._cancel()

    def halt(self) -> None:
        """Send nothing more, cancel what is in flight and wait for the thread to end."""
        thread = self._thread
        if thread is None or not thread.is_alive():
            return
        self._cancel()
        thread.join(HALT_WAIT_S)

    def _cancel(self) -> None:
        loop, main = self._loop, self._main
        if loop is not None and main is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(main.cancel)

    def _discard(self, requests: Sequence[Request]) -> None:
        """lm-eval's bodies are not the ones sent early: stop those, forget their answers."""
        self.halt()
        wanted = {r.key for r in requests}
        differing = sum(key not in wanted for key in self._keys) or abs(
            len(self._keys) - len(requests)
        )
        self.warnings.append(
            f"{self.asked} request(s) sent before lm-eval asked were discarded: evalgate's prompts "
            f"differ from lm-eval's ({differing} of {len(requests)}), so lm-eval's were sent "
            "instead. The scores are lm-eval's; please report this evalgate bug."
        )
        log.warning("%s", self.warnings[-1])
        self.replies = replace(self.replies)  # the same settings, nothing counted
        self.reader, self.dispatched, self.asked = None, [], 0
        self._thread = self._loop = self._main = self._outcome = None
        _LIVE.discard(self)

    # -- on the thread's event loop -----------------------------------------------------------
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

    async def _send_all(self, prepared: Sequence[Request], order: list[int]) -> list[str]:
        """Every request sent in `order` (or read from the journal); the texts in their order,
        each scored for the sequential test as it arrives."""
        client = self.client_factory()
        results: list[str] = [""] * len(prepared)
        semaphore = asyncio.Semaphore(self.num_concurrent)
        done = 0

        async def one(position: int, index: int) -> None:
            nonlocal done
            request = prepared[index]
            ended, text = await self._one(client, semaphore, request)
            if not ended:
                return
            results[index] = text or ""  # a failed request (None) leaves no text
            doc, scorer = request.doc, self.scorer
            if doc is not None and self.reader is not None and scorer is not None:  # None: failed
                self.reader.arrive(position, None if text is None else scorer(doc, text))
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
