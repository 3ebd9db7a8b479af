"""The eval stage of a gate run: journal opened, dispatch started, lm-eval run on its answers,
an early stop settled, the samples written.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from evalgate.evidence import artifacts, journal
from evalgate.evidence.fields import Api
from evalgate.evidence.model import DatasetRecord, EvalRecord, Protocol, Sample
from evalgate.evidence.request_counts import RequestCounts
from evalgate.gate import early_stop
from evalgate.gate.preflight import eval_body, eval_client
from evalgate.gate.record import RunLog
from evalgate.rules.sequential import SequentialTest
from evalgate.settings.endpoint import EndpointSettings
from evalgate.settings.evaluation import EvalSettings
from evalgate.tasks.dataset import Dataset, reference_answer
from evalgate.tasks.prompts import Prompt
from evalgate.tasks.spec import FEWSHOT_SEED, TaskSpec

if TYPE_CHECKING:  # lm-eval and the eval's client load only when an eval starts
    from evalgate.engine.client import EvalClient
    from evalgate.evidence.model import Reply
    from evalgate.gate.dispatch import Dispatch, Progress
    from evalgate.gate.evaluate import Evaluation

log = logging.getLogger(__name__)


def protocol(
    spec: TaskSpec, dataset: Dataset, *, api: Api, limit: int | None, max_tokens: int
) -> Protocol:
    """What decides which questions are asked and how, stated once: it gives the resume
    fingerprint, the check --baseline and `compare` apply, and result.json's eval record."""
    return Protocol(
        task=spec.name,
        task_version=spec.version,
        task_sha256=spec.sha256,
        api=api,
        num_fewshot=spec.num_fewshot,
        fewshot_seed=FEWSHOT_SEED,
        max_tokens=max_tokens,
        temperature=spec.temperature,
        limit=limit,
        dataset=DatasetRecord(**dataset.describe()),
    )


@dataclass
class EvalStage:
    """One run's eval; `dispatch` holds the answers received, also when the eval fails."""

    run: RunLog
    endpoint: EndpointSettings
    ask: EvalSettings
    out: Path
    resume: bool
    progress: Progress | None
    dispatch: Dispatch | None = None

    def evaluate(
        self, spec: TaskSpec, dataset: Dataset, prompts: list[Prompt], max_tokens: int, floor: float
    ) -> Evaluation:
        """Every question asked (or read from the journal) and scored by lm-eval."""
        run, ask = self.run, self.ask
        agreed = protocol(
            spec, dataset, api=self.endpoint.api, limit=ask.limit, max_tokens=max_tokens
        )
        sampling = spec.sampling | ask.request_fields()
        bodies = [eval_body(self.endpoint, p, max_tokens, spec.stop, sampling) for p in prompts]
        answers, kept = self._journal(
            agreed, len(prompts), {journal.body_key(body) for body in bodies}
        )
        test = None
        if ask.early_stop != "off":
            filters = early_stop.gated_filters(spec)
            test = SequentialTest(floor, filters, mode=ask.early_stop, alpha=ask.alpha)
        sent = self.dispatch = self._dispatch(max_tokens, answers, kept, test)
        if test is None:  # the answers flow while lm-eval loads and builds its contexts
            from evalgate.gate.dispatch import Request

            own = [Request.of(p.doc_id, body) for p, body in zip(prompts, bodies, strict=True)]
            sent.start(own)
        recorded = run.eval = EvalRecord(  # before any answer: the protocol and how it is sent
            **msgspec.structs.asdict(agreed),
            num_concurrent=ask.num_concurrent,
            chat_template_kwargs=ask.chat_template_kwargs,
            reasoning_effort=ask.reasoning_effort,
            questions=len(prompts),
            requests=RequestCounts.zero(),
        )
        try:  # lm-eval loads only here: without --early-stop the answers already flow
            import lm_eval

            from evalgate.gate.evaluate import GateLM, run_eval

            run.eval = msgspec.structs.replace(recorded, lm_eval_version=lm_eval.__version__)
            sent.scorer = early_stop.AnswerScorer(spec) if test is not None else None
            lm = GateLM(dispatch=sent, sampling=sampling)
            evaluation = run_eval(spec, dataset, lm, ask.limit)
        finally:
            sent.halt()  # before the journal closes: nothing is in flight any more
            answers.close()
            run.eval = msgspec.structs.replace(
                run.eval or recorded, requests=sent.replies.recorded()
            )
            run.warnings += sent.warnings
        return self._keep(evaluation, sent, test)

    def _journal(
        self, agreed: Protocol, questions: int, keys: set[str]
    ) -> tuple[journal.Journal, dict[str, Reply]]:
        """The journal every answer is appended to, and the answers it kept (--resume): those
        to this run's requests (`keys`), and only those, are counted and written back."""
        engine = self.run.endpoint.engine if self.run.endpoint else None
        fingerprint = journal.fingerprint(
            agreed,
            model=self.run.model,
            engine_version=engine.version if engine else None,
            served=self.run.context.served if self.run.context else None,
            questions=questions,
        )
        path = self.out / artifacts.JOURNAL_NAME
        found = journal.read_journal(path, fingerprint) if self.resume else {}
        kept = {key: reply for key, reply in found.items() if key in keys}
        if found:
            other = len(found) - len(kept)
            log.info(
                "resuming: %d answers from %s are reused%s",
                len(kept),
                path,
                f" ({other} answering no question of this run are dropped)" if other else "",
            )
        return journal.Journal(path, fingerprint, kept), kept

    def _dispatch(
        self,
        max_tokens: int,
        answers: journal.Journal,
        kept: dict[str, Reply],
        test: SequentialTest | None,
    ) -> Dispatch:
        from evalgate.engine.client import EvalClient
        from evalgate.engine.workers import WorkerWatch
        from evalgate.gate.dispatch import Dispatch
        from evalgate.gate.replies import InlineThinking, Replies

        endpoint, ask = self.endpoint, self.ask
        network = endpoint.network

        def client() -> EvalClient:
            options = eval_client(
                endpoint, timeout=network.timeout, max_connections=ask.num_concurrent
            )
            watch = WorkerWatch(
                endpoint.worker_urls,
                endpoint.key,
                network=network,
                deadline=network.discovery_timeout,
            )
            return EvalClient(**options, watch=watch)

        return Dispatch(
            client_factory=client,
            replies=Replies(
                str(endpoint.served_model),
                endpoint.api,
                max_tokens,
                ask.max_failed_requests,
                answers,
                InlineThinking(ask.think_start_marker, ask.think_end_marker),
            ),
            num_concurrent=ask.num_concurrent,
            resumed=kept,
            progress=self.progress,
            sequential=test,
        )

    def _keep(
        self, evaluation: Evaluation, sent: Dispatch, test: SequentialTest | None
    ) -> Evaluation:
        """An early stop settled; the samples and lm-eval's raw results written."""
        run, stopped = self.run, False
        if test is not None:
            evaluation, record = early_stop.settle(evaluation, sent, test)
            if run.eval is not None:
                run.eval = msgspec.structs.replace(run.eval, early_stop=record)
            stopped = record.stopped
        run.scores = evaluation.scores
        artifacts.write_samples(self.out, evaluation.samples)
        if not stopped:  # lm-eval's own scores count the questions never asked as wrong
            artifacts.write_json(self.out / artifacts.RAW_NAME, evaluation.raw)
        run.files = {
            "samples": artifacts.SAMPLES_NAME,
            "lm_eval_results": None if stopped else artifacts.RAW_NAME,
            "journal": artifacts.JOURNAL_NAME,
        }
        return evaluation

    def partial_samples(self, dataset: Dataset | None) -> None:
        """On an error or abort mid-eval: the answers received so far, as samples.jsonl."""
        if self.dispatch is None or not self.dispatch.replies.answers:
            return
        docs = dict(enumerate(dataset.test)) if dataset else {}
        blank = {"question": "", "answer": ""}
        records = [
            Sample(
                **msgspec.structs.asdict(reply),
                question=docs.get(doc_id, blank)["question"],
                target=reference_answer(docs.get(doc_id, blank)["answer"]),
                filters={},  # the eval did not finish, so nothing was scored
            )
            for doc_id, reply in sorted(self.dispatch.replies.answers.items())
        ]
        artifacts.write_samples(self.out, records)
        self.run.files.setdefault("samples", artifacts.SAMPLES_NAME)
        self.run.files.setdefault("journal", artifacts.JOURNAL_NAME)
