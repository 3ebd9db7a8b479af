"""The eval's requests, on a thread of their own (sending.py sends them, replies.py records
each answer).

A gate run starts the dispatch the moment the probe passes, with the bodies evalgate built from
its own prompts (tasks.prompts: the ones lm-eval will build), while lm-eval is still importing.
When lm-eval asks for its answers (lm.GateLM), the dispatch under way serves them if lm-eval's
bodies are exactly the ones being sent; otherwise it is halted, its answers are discarded with a
warning, and lm-eval's own bodies are sent.

With a sequential test (--early-stop) nothing is sent early (the live scoring needs lm-eval's
filters); once the test is certain, what is in flight is cancelled, and the questions never
answered come back to lm-eval as empty answers (early_stop.py scores only the ones read).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalgate.engine.client import EvalClient
from evalgate.evidence.journal import Journal
from evalgate.evidence.model import Reply
from evalgate.gate.replies import Replies
from evalgate.gate.sending import Progress, Request, Scorer, Sending
from evalgate.gate.thinking import InlineThinking
from evalgate.rules.sequential import PrefixReader, SequentialTest, dispatch_order

log = logging.getLogger(__name__)
HALT_WAIT_S = 30.0
"""How long halting waits for the requests in flight to be cancelled and the client closed."""
_LIVE: weakref.WeakSet[Dispatch] = weakref.WeakSet()


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
    model: str
    api: str
    max_tokens: int
    num_concurrent: int
    max_failed: int
    journal: Journal | None
    resumed: dict[str, Reply] = field(default_factory=dict)
    progress: Progress | None = None
    thinking: InlineThinking | None = None
    replies: Replies = field(init=False)
    reader: PrefixReader | None = field(default=None, init=False)
    dispatched: list[int] = field(default_factory=list, init=False)
    """doc_ids in the order they were (to be) sent."""
    sending: Sending | None = field(default=None, init=False)
    early: bool = field(default=False, init=False)
    """Whether the answers lm-eval received were sent before it asked for them."""
    warnings: list[str] = field(default_factory=list, init=False)
    _keys: list[str] = field(default_factory=list, init=False)
    _thread: threading.Thread | None = field(default=None, init=False)
    _loop: asyncio.AbstractEventLoop | None = field(default=None, init=False)
    _main: asyncio.Task[Any] | None = field(default=None, init=False)
    _outcome: list[str] | BaseException | None = field(default=None, init=False)
    _stopped: str | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.replies = Replies(
            self.model, self.api, self.max_tokens, self.max_failed, self.journal, self.thinking
        )

    @property
    def asked(self) -> int:
        """Questions sent to the engine, or answered from the journal."""
        return self.sending.asked if self.sending is not None else 0

    # -- the thread ---------------------------------------------------------------------------
    def start(
        self,
        requests: Sequence[Request],
        *,
        sequential: SequentialTest | None = None,
        docs: Sequence[dict[str, Any]] = (),
        scorer: Scorer | None = None,
    ) -> None:
        """Begin sending `requests` (in a seeded order with a sequential test); `answers` or
        `wait` returns what came back."""
        order = list(range(len(requests)))
        if sequential is not None and sequential.active:
            order = dispatch_order(len(requests))
            self.reader = PrefixReader(sequential)
        self.replies.counts.total = len(requests)
        self.dispatched = [requests[i].doc_id for i in order]
        self._keys = [r.key for r in requests]
        sending = self.sending = Sending(
            self.replies, self.num_concurrent, self.resumed, self.progress, self.reader
        )
        started = threading.Event()

        async def run() -> list[str]:
            self._loop = asyncio.get_running_loop()
            self._main = asyncio.current_task()
            started.set()
            client = self.client_factory()
            return await sending.send_all(client, list(requests), order, list(docs), scorer)

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

    def answers(
        self,
        requests: Sequence[Request],
        *,
        sequential: SequentialTest | None = None,
        docs: Sequence[dict[str, Any]] = (),
        scorer: Scorer | None = None,
    ) -> list[str]:
        """The answers to `requests`, in their order: from the dispatch under way when it is
        sending exactly these bodies, else from one started now."""
        if self._thread is not None:
            if self._keys == [r.key for r in requests]:
                self.early = True
                log.info(
                    "lm-eval asked for the %d requests under way since the probe passed "
                    "(%d sent, %d answered before it asked)",
                    len(requests),
                    self.asked,
                    self.replies.counts.completed + self.replies.counts.failed,
                )
                return self.wait()
            self._discard(requests)
        self.start(requests, sequential=sequential, docs=docs, scorer=scorer)
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
        sent = self.asked
        self.warnings.append(
            f"{sent} request(s) sent before lm-eval asked were discarded: evalgate's prompts "
            f"differ from lm-eval's ({differing} of {len(requests)}), so lm-eval's were sent "
            "instead. The scores are lm-eval's; please report this evalgate bug."
        )
        log.warning("%s", self.warnings[-1])
        self.replies = dataclasses.replace(self.replies)  # the same settings, nothing counted
        self.reader, self.dispatched, self.sending = None, [], None
        self._thread = self._loop = self._main = self._outcome = None
        _LIVE.discard(self)
