"""The model lm-eval evaluates: the engine, reached through evalgate's client.

lm-eval builds every prompt, filters the answers and scores them; this adapter only sends the
requests. Unlike lm-eval's API models it stops the whole eval within seconds on the first
answer that retrying cannot change (a 4xx), counts failed requests instead of scoring them
silently, journals every answer as it arrives, and resumes from a journal.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lm_eval.api.model import LM

from evalgate.engine.client import Completion, EvalClient, RequestFailed, describe_failure
from evalgate.engine.request import generation_body
from evalgate.errors import EvalFailedError
from evalgate.evidence.journal import Journal, body_key
from evalgate.evidence.model import RequestCounts

log = logging.getLogger(__name__)
Progress = Callable[[int, int], None]
_NOT_SENT = frozenset({"until", "do_sample", "temperature", "max_gen_toks", "max_tokens"})
"""Generation settings lm-eval consumes itself; the task's others (top_p) go into the body."""


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
    answers: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Per doc_id: response, finish_reason, completion_tokens, answer_field, error,
    prompt_sha256."""

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
        return asyncio.run(self._run_all(prepared))

    def _record(self, request: Request, completion: Completion, *, resumed: bool) -> str:
        tally = self.tally
        tally.completed += 1
        tally.resumed += int(resumed)
        tally.truncated += int(completion.finish_reason == "length")
        tally.empty += int(not completion.text.strip())
        tally.answers[request.doc_id] = {
            "response": completion.text,
            "finish_reason": completion.finish_reason,
            "completion_tokens": completion.completion_tokens,
            "answer_field": completion.source,
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
            workers = failure.unreachable_workers
            gone = (
                f"The worker{'s' if len(workers) > 1 else ''} {', '.join(workers)} behind the "
                f"router {'are' if len(workers) > 1 else 'is'} unreachable: the engine went "
                "away during the eval. "
                if workers
                else ""
            )
            raise EvalFailedError(
                f"{gone}{tally.failed} request(s) failed after {failure.attempts} attempt(s) each "
                f"(allowed: {self.max_failed}, --max-failed-requests); last: question "
                f"{request.doc_id}: {message}. A failed request cannot be scored, so the run "
                "cannot be gated."
            )

    async def _run_all(self, prepared: list[Request]) -> list[str]:
        results: list[str] = [""] * len(prepared)
        client = self._client_factory()
        semaphore = asyncio.Semaphore(self.num_concurrent)
        done = 0

        async def one(index: int, request: Request) -> None:
            nonlocal done
            kept = self.resumed.get(request.key)
            if kept is not None:
                results[index] = self._record(
                    request,
                    Completion(
                        kept["text"],
                        kept.get("finish_reason"),
                        kept.get("completion_tokens"),
                        0,
                        kept.get("source") or ("content" if self.api == "chat" else "text"),
                    ),
                    resumed=True,
                )
            else:
                async with semaphore:
                    try:
                        completion = await client.complete(request.body)
                    except RequestFailed as failure:
                        self._fail(request, failure)
                        completion = None
                if completion is not None:
                    results[index] = self._record(request, completion, resumed=False)
            done += 1
            if self.progress is not None:
                self.progress(done, len(prepared))

        tasks = [asyncio.create_task(one(i, r)) for i, r in enumerate(prepared)]
        try:
            for finished in asyncio.as_completed(tasks):
                await finished  # the first fatal error propagates from here
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self.tally.retried = client.retried
            await client.close()
        return results
