"""The eval's requests, sent and answered, on a thread of their own.

A Dispatch sends a list of generation requests (engine.request bodies) with at most
--num-concurrent in flight, records every answer (the Tally, the journal), resumes answers a
journal kept, stops the whole eval within seconds on the first answer retrying cannot change (a
4xx) or past --max-failed-requests, and counts failed requests instead of scoring them silently.

It runs its event loop on a thread of its own, so a gate run starts it the moment the probe
passes, with the bodies evalgate built from its own prompts (tasks.prompts: the prompts lm-eval
will build), while lm-eval is still importing and building its contexts. When lm-eval asks for
its answers (lm.GateLM), the dispatch already under way serves them if lm-eval's bodies are
exactly the ones being sent; otherwise it is halted, its answers are discarded with a warning,
and lm-eval's own bodies are sent. lm-eval filters and scores every answer either way.

With a sequential test (--early-stop) nothing is sent early (the live scoring needs lm-eval's
filters): the questions are sent in a seeded random order, each answer is scored as it arrives
(scoring.py) and read in that order (sequential.PrefixReader); once the test is certain nothing
more is sent, the requests in flight are cancelled, and the questions never answered come back
to lm-eval as empty answers (early_stop.py scores only the ones read).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import logging
import math
import statistics
import threading
import weakref
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import msgspec

from evalgate.engine import dynamo
from evalgate.engine.answers import REASONING_FIELDS
from evalgate.engine.client import Completion, EvalClient, RequestFailed, describe_failure
from evalgate.errors import EvalFailedError
from evalgate.evidence.journal import Journal, body_key
from evalgate.evidence.model import AnswerField, Reply, RequestCounts, TokenSpread
from evalgate.gate.thinking import InlineThinking
from evalgate.rules.sequential import PrefixReader, SequentialTest, dispatch_order

log = logging.getLogger(__name__)
Progress = Callable[[int, int], None]
Scorer = Callable[[dict[str, Any], str], dict[str, bool]]
MAX_CHARS_PER_TOKEN = 64
"""An answer longer than this many characters per token of its budget cannot be one the engine
generated within max_tokens; it is cut before it is scored and stored."""
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


@dataclass
class Tally:
    """What happened to the eval's requests: the counts result.json records, and what the
    warnings and the samples need besides."""

    counts: RequestCounts = field(default_factory=RequestCounts.zero)
    reasoning_tokens: list[int] = field(default_factory=list)
    answers: dict[int, Reply] = field(default_factory=dict)
    """The reply to each question, by doc_id."""
    filtered: int = 0
    """Answers stopped by the engine's content filter (also counted as truncated)."""
    oversized: int = 0
    """Answers longer than max_tokens allows, cut before scoring (also counted as truncated)."""
    other_models: Counter[str] = field(default_factory=Counter)
    """Answers naming a model other than the one requested, by the name they gave."""

    def recorded(self) -> RequestCounts:
        """The counts as result.json records them."""
        return msgspec.structs.replace(self.counts, reasoning_tokens=spread(self.reasoning_tokens))


class _OverBudget(Exception):
    """More requests failed than --max-failed-requests allows (the message waits for the
    final count)."""

    def __init__(
        self, doc_id: int, detail: str, attempts: int, workers: tuple[str, ...] = ()
    ) -> None:
        super().__init__(detail)
        self.doc_id = doc_id
        self.detail = detail
        self.attempts = attempts
        self.workers = workers
        """Workers the router said it could not reach (the engine went away)."""


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


@dataclass(frozen=True)
class Request:
    """One generation request, ready to send."""

    doc_id: int
    body: dict[str, Any]
    key: str

    @classmethod
    def of(cls, doc_id: int, body: dict[str, Any]) -> Request:
        return cls(doc_id, body, body_key(body))


class Dispatch:
    """Sends one eval's requests and records their answers (see the module's docstring)."""

    def __init__(
        self,
        *,
        client_factory: Callable[[], EvalClient],
        model: str,
        api: str,
        max_tokens: int,
        num_concurrent: int,
        max_failed: int,
        journal: Journal | None,
        resumed: dict[str, Reply] | None = None,
        progress: Progress | None = None,
        thinking: InlineThinking | None = None,
    ) -> None:
        self._client_factory = client_factory
        self.model = model
        self.api = api
        self.max_tokens = max_tokens
        self.num_concurrent = num_concurrent
        self.max_failed = max_failed
        self.journal = journal
        self.resumed = resumed or {}
        self.progress = progress
        self.thinking = thinking
        """The markers of thinking written into the answer (None: the whole answer is scored)."""
        self.tally = Tally()
        self.reader: PrefixReader | None = None
        self.dispatched: list[int] = []
        """doc_ids in the order they were (to be) sent."""
        self.asked = 0
        """Questions sent to the engine, or answered from the journal."""
        self.early = False
        """Whether the answers lm-eval received were sent before it asked for them."""
        self.warnings: list[str] = []
        self.engine_notes: list[str] = []
        """Implausible values the engine's answers carried (not used)."""
        self._keys: list[str] = []
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._main: asyncio.Task[Any] | None = None
        self._outcome: list[str] | BaseException | None = None
        self._stopped: str | None = None
        self._worker_gone: str | None = None
        """What Dynamo's frontend said when the model's worker went away (engine.dynamo)."""

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
        self.tally.counts.total = len(requests)
        self.dispatched = [requests[i].doc_id for i in order]
        self._keys = [r.key for r in requests]
        started = threading.Event()

        async def run() -> list[str]:
            self._loop = asyncio.get_running_loop()
            self._main = asyncio.current_task()
            started.set()
            return await self._run_all(list(requests), order, list(docs), scorer)

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
                    self.tally.counts.completed + self.tally.counts.failed,
                )
                return self.wait()
            self._discard(requests)
        self.start(requests, sequential=sequential, docs=docs, scorer=scorer)
        return self.wait()

    def wait(self) -> list[str]:
        """Block until every answer is in (or the eval stopped); re-raise what stopped it."""
        if self._thread is None:
            raise RuntimeError("nothing was dispatched")
        # What exists now (lm-eval, its data set, its contexts) lives until the answers are in:
        # frozen, the collector stops walking it on each full collection the answers' objects
        # set off, which held the sending thread up to a quarter of a second at a time.
        gc.freeze()
        try:
            self._thread.join()
        except BaseException:  # Ctrl-C or a stop signal, raised in this (the main) thread
            self.halt()
            raise
        finally:
            gc.unfreeze()
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
        self.tally, self.reader, self.dispatched, self.asked = Tally(), None, [], 0
        self._thread = self._loop = self._main = self._outcome = None
        _LIVE.discard(self)

    # -- answers ------------------------------------------------------------------------------
    def _read(
        self, scorer: Scorer | None, position: int, doc: dict[str, Any], text: str | None
    ) -> None:
        """Give the sequential test the answer at `position` (None: the request failed)."""
        if self.reader is None or scorer is None:
            return
        self.reader.arrive(position, None if text is None else scorer(doc, text))

    @property
    def max_chars(self) -> int:
        """The longest answer kept: MAX_CHARS_PER_TOKEN per token of the budget."""
        return MAX_CHARS_PER_TOKEN * self.max_tokens

    def notes(self) -> list[str]:
        """Warnings about the answers, for the result."""
        tally, found = self.tally, []
        if tally.filtered:
            found.append(
                f"{tally.filtered} answer(s) stopped by the engine's content filter "
                "(finish_reason content_filter)"
            )
        if tally.oversized:
            found.append(
                f"{tally.oversized} answer(s) were longer than max_tokens allows "
                f"({self.max_tokens}): cut to {self.max_chars} characters, counted as truncated"
            )
        found += [
            f"{count} answer(s) came from model {name!r}, not the requested {self.model!r}: "
            "check that --base-url reaches the engine serving it"
            for name, count in tally.other_models.items()
        ]
        return found + self.engine_notes

    def _record(self, request: Request, completion: Completion, *, resumed: bool) -> str:
        tally, counts = self.tally, self.tally.counts
        counts.completed += 1
        counts.resumed += int(resumed)
        if len(completion.text) > self.max_chars:  # the engine ignored the budget
            tally.oversized += 1
            completion = dataclasses.replace(completion, text=completion.text[: self.max_chars])
            if completion.finish_reason != "length":
                counts.truncated += 1
        if completion.model is not None and completion.model != self.model:
            tally.other_models[completion.model] += 1
        sent = completion
        completion, unended = self._inline(completion)
        length = completion.finish_reason == "length"
        tally.filtered += int(completion.finish_reason == "content_filter")
        counts.truncated += int(length or completion.finish_reason == "content_filter")
        counts.empty += int(not completion.text.strip() and not (unended and length))
        thinking = completion.source in REASONING_FIELDS
        counts.from_reasoning += int(thinking)
        counts.cut_while_thinking += int((thinking or unended) and length)
        if completion.reasoning_tokens is not None:
            tally.reasoning_tokens.append(completion.reasoning_tokens)
        reply = tally.answers[request.doc_id] = Reply(
            doc_id=request.doc_id,
            prompt_sha256=request.key,
            response=completion.text,
            finish_reason=completion.finish_reason,
            completion_tokens=completion.completion_tokens,
            answer_field=cast(AnswerField, completion.source),  # the client names one of these
            reasoning=completion.reasoning,
            reasoning_tokens=completion.reasoning_tokens,
            error=None,
        )
        if self.journal is not None and not resumed:
            # as sent: a resumed answer is taken apart again
            self.journal.append(
                msgspec.structs.replace(reply, response=sent.text, reasoning=sent.reasoning)
            )
        return completion.text

    def _inline(self, completion: Completion) -> tuple[Completion, bool]:
        """The answer with thinking written into it taken out (thinking.py), kept as its
        reasoning; and whether that thinking never ended."""
        if self.thinking is None or completion.source in REASONING_FIELDS:
            return completion, False
        answer, thought, ended = self.thinking.split(completion.text)
        if thought is None:
            return completion, False
        self.tally.counts.inline_thinking += 1
        reasoning = completion.reasoning or thought
        return dataclasses.replace(completion, text=answer, reasoning=reasoning), not ended

    def _received(self, kept: Reply) -> Completion:
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

    def _fail(self, request: Request, failure: RequestFailed) -> None:
        tally = self.tally
        tally.counts.failed += 1
        message = describe_failure(failure.error)
        tally.answers[request.doc_id] = Reply(
            doc_id=request.doc_id,
            prompt_sha256=request.key,
            response=None,
            finish_reason=None,
            error=message,
        )
        gone = dynamo.worker_gone(failure.error)
        self._worker_gone = gone or self._worker_gone
        if failure.fatal and gone is not None:
            raise EvalFailedError(
                f"{gone}: its worker went away during the eval, at question {request.doc_id}. "
                "Restart the worker (its log says why it stopped) and run the eval again."
            )
        if failure.fatal:
            raise EvalFailedError(
                f"The engine rejected question {request.doc_id} ({message}). Retrying cannot "
                "change this answer, so the eval stopped instead of sending the rest. "
                "Fix the request or the engine; the probe passed, so the prompt is unusual."
            )
        if tally.counts.failed > self.max_failed:
            raise _OverBudget(
                request.doc_id, message, failure.attempts, failure.unreachable_workers
            )

    def _over_budget(self, first: _OverBudget) -> EvalFailedError:
        """The error for failures over the budget, counted once every request in flight has
        ended: the same number result.json records."""
        workers = first.workers
        gone = (
            f"The worker{'s' if len(workers) > 1 else ''} {', '.join(workers)} behind the "
            f"router {'are' if len(workers) > 1 else 'is'} unreachable: the engine went "
            "away during the eval. "
            if workers
            else ""
        )
        if not gone and self._worker_gone is not None:
            gone = f"{self._worker_gone}: its worker went away during the eval. "
        return EvalFailedError(
            f"{gone}{self.tally.counts.failed} request(s) failed after {first.attempts} "
            f"attempt(s) each (allowed: {self.max_failed}, --max-failed-requests); last: question "
            f"{first.doc_id}: {first.detail}. A failed request cannot be scored, so the run "
            "cannot be gated."
        )

    async def _ask(self, client: EvalClient, request: Request) -> Completion | None:
        """Send one request: its answer, or None when it failed (recorded). It counts as asked
        once its headers left: one cancelled while it connected never reached the engine."""
        counted = False

        def asked() -> None:
            nonlocal counted
            if not counted:
                counted = True
                self.asked += 1

        try:
            completion = await client.complete(request.body, on_sent=asked)
        except RequestFailed as failure:
            asked()
            self._fail(request, failure)
            return None
        asked()
        return completion

    async def _run_all(
        self,
        prepared: list[Request],
        order: list[int],
        docs: list[dict[str, Any]],
        scorer: Scorer | None,
    ) -> list[str]:
        results: list[str] = [""] * len(prepared)
        client = self._client_factory()
        semaphore = asyncio.Semaphore(self.num_concurrent)
        done = 0

        async def one(position: int, index: int, request: Request) -> None:
            nonlocal done
            kept = self.resumed.get(request.key)
            text: str | None = None
            if kept is not None:
                self.asked += 1
                text = results[index] = self._record(request, self._received(kept), resumed=True)
            else:
                async with semaphore:
                    if self.reader is not None and self.reader.decision is not None:
                        return  # certain while this one waited for a slot: never sent
                    completion = await self._ask(client, request)
                if completion is not None:
                    text = results[index] = self._record(request, completion, resumed=False)
            if docs:
                self._read(scorer, position, docs[index], text)
            done += 1
            if self.progress is not None:
                self.progress(done, len(prepared))

        tasks = [
            asyncio.create_task(one(position, index, prepared[index]))
            for position, index in enumerate(order)
        ]
        over: _OverBudget | None = None
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
        except _OverBudget as first:
            over = first
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self.tally.counts.retried, self.engine_notes = (
                client.retried,
                client.problems.describe(),
            )
            await client.close()
        if over is not None:
            raise self._over_budget(over)
        return results
