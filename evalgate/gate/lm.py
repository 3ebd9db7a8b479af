"""The model lm-eval evaluates: the engine, reached through evalgate's client.

lm-eval builds every prompt, filters the answers and scores them; this adapter only sends the
requests. Unlike lm-eval's API models it stops the whole eval within seconds on the first
answer that retrying cannot change (a 4xx), counts failed requests instead of scoring them
silently, journals every answer as it arrives, and resumes from a journal.

With a sequential test (--early-stop), the questions are sent in a seeded random order, each
answer is scored as it arrives (scoring.py) and read in that order (sequential.PrefixReader);
once the test is certain nothing more is sent, the requests in flight are cancelled, and the
questions never answered come back to lm-eval as empty answers (run.py scores only the ones read).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import math
import statistics
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lm_eval.api.model import LM

from evalgate.engine.client import (
    REASONING_FIELDS,
    Completion,
    EvalClient,
    RequestFailed,
    describe_failure,
)
from evalgate.engine.request import generation_body
from evalgate.errors import EvalFailedError
from evalgate.evidence.journal import Journal, body_key
from evalgate.evidence.model import RequestCounts, TokenSpread
from evalgate.gate.sequential import PrefixReader, SequentialTest, dispatch_order

log = logging.getLogger(__name__)
Progress = Callable[[int, int], None]
_NOT_SENT = frozenset({"until", "do_sample", "temperature", "max_gen_toks", "max_tokens"})
"""Generation settings lm-eval consumes itself; the task's others (top_p) go into the body."""
MAX_CHARS_PER_TOKEN = 64
"""An answer longer than this many characters per token of its budget cannot be one the engine
generated within max_tokens; it is cut before it is scored and stored."""
Scorer = Callable[[dict[str, Any], str], dict[str, bool]]


@dataclass
class Tally:
    """What happened to the eval's requests."""

    total: int = 0
    completed: int = 0
    failed: int = 0
    truncated: int = 0
    empty: int = 0
    resumed: int = 0
    retried: int = 0
    from_reasoning: int = 0
    cut_while_thinking: int = 0
    reasoning_tokens: list[int] = field(default_factory=list)
    cut_tokens: list[int] = field(default_factory=list)
    """completion_tokens of the answers cut while thinking."""
    answers: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Per doc_id: response, finish_reason, completion_tokens, answer_field, reasoning,
    reasoning_tokens, error, prompt_sha256."""
    filtered: int = 0
    """Answers stopped by the engine's content filter (also counted as truncated)."""
    oversized: int = 0
    """Answers longer than max_tokens allows, cut before scoring (also counted as truncated)."""
    other_models: Counter[str] = field(default_factory=Counter)
    """Answers naming a model other than the one requested, by the name they gave."""

    def counts(self) -> RequestCounts:
        """The counts as result.json records them."""
        return RequestCounts(
            total=self.total,
            completed=self.completed,
            failed=self.failed,
            retried=self.retried,
            truncated=self.truncated,
            empty=self.empty,
            resumed=self.resumed,
            from_reasoning=self.from_reasoning,
            cut_while_thinking=self.cut_while_thinking,
            reasoning_tokens=spread(self.reasoning_tokens),
        )


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


class GateLM(LM):  # type: ignore[misc]  # lm-eval's LM is untyped
    """lm-eval model backed by an OpenAI-compatible endpoint."""

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
        resumed: dict[str, dict[str, Any]] | None = None,
        progress: Progress | None = None,
        sampling: dict[str, Any] | None = None,
        sequential: SequentialTest | None = None,
        scorer: Scorer | None = None,
    ) -> None:
        super().__init__()
        self.sampling = dict(sampling or {})
        """The task's temperature and other generation settings (TaskSpec.sampling)."""
        self._client_factory = client_factory
        self.model = model
        self.api = api
        self.max_tokens = max_tokens
        self.num_concurrent = num_concurrent
        self.max_failed = max_failed
        self.journal = journal
        self.resumed = resumed or {}
        self.progress = progress
        self.tally = Tally()
        self.sequential = sequential if sequential is not None and sequential.active else None
        self.scorer = scorer
        self.reader: PrefixReader | None = None
        self.dispatched: list[int] = []
        """doc_ids in the order they were (to be) sent."""
        self.asked = 0
        """Questions sent to the engine, or answered from the journal."""

    # -- what lm-eval asks of a chat-capable API model ----------------------------------------
    @property
    def tokenizer_name(self) -> str:
        return "engine"

    def apply_chat_template(
        self, chat_history: list[dict[str, str]], add_generation_prompt: bool = True
    ) -> str:
        """Keep the turns as JSON: the engine applies the model's own chat template."""
        return json.dumps(chat_history, ensure_ascii=False)

    def loglikelihood(self, requests: list[Any]) -> list[tuple[float, bool]]:
        raise NotImplementedError("evalgate's tasks only generate")

    def loglikelihood_rolling(self, requests: list[Any]) -> list[float]:
        raise NotImplementedError("evalgate's tasks only generate")

    # -- generation ---------------------------------------------------------------------------
    def _request(self, instance: Any) -> Request:
        """The body lm-eval's local-*-completions model sends: prompt or messages, model,
        max_tokens, temperature, stop, seed, then the task's other generation settings (top_p)."""
        context, gen_kwargs = instance.args
        # The task file's own values, as written (lm-eval turns a temperature of 0 into 0.0;
        # the harness's job overrides it with its gen_kwargs, and the engine receives 0).
        extra = {k: v for k, v in gen_kwargs.items() if k not in _NOT_SENT} | self.sampling
        temperature = extra.pop("temperature", gen_kwargs.get("temperature", 0))
        chat = self.api == "chat"
        body = generation_body(
            api=self.api,
            model=self.model,
            max_tokens=self.max_tokens,
            stop=list(gen_kwargs.get("until") or []),
            temperature=temperature,
            messages=json.loads(context) if chat else None,
            prompt=None if chat else context,
            extra=extra,
        )
        return Request(int(instance.doc_id), body, body_key(body))

    def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
        prepared = [self._request(instance) for instance in requests]
        self.tally.total = len(prepared)
        order = list(range(len(prepared)))
        docs: list[dict[str, Any]] = []
        if self.sequential is not None:
            order = dispatch_order(len(prepared))
            docs = [dict(instance.doc) for instance in requests]
            self.reader = PrefixReader(self.sequential)
        self.dispatched = [prepared[i].doc_id for i in order]
        return asyncio.run(self._run_all(prepared, order, docs))

    def _read(self, position: int, doc: dict[str, Any], text: str | None) -> None:
        """Give the sequential test the answer at `position` (None: the request failed)."""
        if self.reader is None or self.scorer is None:
            return
        self.reader.arrive(position, None if text is None else self.scorer(doc, text))

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
        return found

    def _record(self, request: Request, completion: Completion, *, resumed: bool) -> str:
        tally = self.tally
        tally.completed += 1
        tally.resumed += int(resumed)
        if len(completion.text) > self.max_chars:  # the engine ignored the budget
            tally.oversized += 1
            completion = dataclasses.replace(completion, text=completion.text[: self.max_chars])
            if completion.finish_reason != "length":
                tally.truncated += 1
        if completion.model is not None and completion.model != self.model:
            tally.other_models[completion.model] += 1
        tally.filtered += int(completion.finish_reason == "content_filter")
        tally.truncated += int(completion.finish_reason in ("length", "content_filter"))
        tally.empty += int(not completion.text.strip())
        thinking = completion.source in REASONING_FIELDS
        tally.from_reasoning += int(thinking)
        if thinking and completion.finish_reason == "length":
            tally.cut_while_thinking += 1
            tally.cut_tokens.append(completion.completion_tokens or self.max_tokens)
        if completion.reasoning_tokens is not None:
            tally.reasoning_tokens.append(completion.reasoning_tokens)
        tally.answers[request.doc_id] = {
            "response": completion.text,
            "finish_reason": completion.finish_reason,
            "completion_tokens": completion.completion_tokens,
            "answer_field": completion.source,
            "reasoning": completion.reasoning,
            "reasoning_tokens": completion.reasoning_tokens,
            "error": None,
            "prompt_sha256": request.key,
        }
        if self.journal is not None and not resumed:
            self.journal.append(
                {
                    "key": request.key,
                    "doc_id": request.doc_id,
                    "text": completion.text,
                    "finish_reason": completion.finish_reason,
                    "completion_tokens": completion.completion_tokens,
                    "source": completion.source,
                    "reasoning": completion.reasoning,
                    "reasoning_tokens": completion.reasoning_tokens,
                }
            )
        return completion.text

    def _fail(self, request: Request, failure: RequestFailed) -> None:
        tally = self.tally
        tally.failed += 1
        message = describe_failure(failure.error)
        tally.answers[request.doc_id] = {
            "response": None,
            "finish_reason": None,
            "completion_tokens": None,
            "answer_field": None,
            "error": message,
            "prompt_sha256": request.key,
        }
        if failure.fatal:
            raise EvalFailedError(
                f"The engine rejected question {request.doc_id} ({message}). Retrying cannot "
                "change this answer, so the eval stopped instead of sending the rest. "
                "Fix the request or the engine; the probe passed, so the prompt is unusual."
            )
        if tally.failed > self.max_failed:
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
        return EvalFailedError(
            f"{gone}{self.tally.failed} request(s) failed after {first.attempts} attempt(s) each "
            f"(allowed: {self.max_failed}, --max-failed-requests); last: question "
            f"{first.doc_id}: {first.detail}. A failed request cannot be scored, so the run "
            "cannot be gated."
        )

    async def _run_all(
        self, prepared: list[Request], order: list[int], docs: list[dict[str, Any]]
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
                text = results[index] = self._record(
                    request,
                    Completion(
                        kept["text"],
                        kept.get("finish_reason"),
                        kept.get("completion_tokens"),
                        0,
                        kept.get("source") or ("content" if self.api == "chat" else "text"),
                        reasoning=kept.get("reasoning"),
                        reasoning_tokens=kept.get("reasoning_tokens"),
                    ),
                    resumed=True,
                )
            else:
                async with semaphore:
                    if self.reader is not None and self.reader.decision is not None:
                        return  # certain while this one waited for a slot: never sent
                    self.asked += 1
                    try:
                        completion = await client.complete(request.body)
                    except RequestFailed as failure:
                        self._fail(request, failure)
                        completion = None
                if completion is not None:
                    text = results[index] = self._record(request, completion, resumed=False)
            if docs:
                self._read(position, docs[index], text)
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
            self.tally.retried = client.retried
            await client.close()
        if over is not None:
            raise self._over_budget(over)
        return results
