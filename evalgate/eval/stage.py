"""The eval stage of a gate run: journal opened, dispatch started, lm-eval run on its answers, an
early stop settled, the samples written. Also --early-stop's scoring, each answer as it arrives
(its test needs each verdict while the eval runs: docs/early-stop.md, "Read in dispatch order"),
and the refusal of simulated speculative decoding.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from evalgate import numbers
from evalgate.errors import EvalFailedError, UsageError
from evalgate.evidence import artifacts, journal
from evalgate.evidence.model import (
    Api,
    DatasetRecord,
    EarlyStopRecord,
    EvalRecord,
    FilterEvidence,
    Protocol,
    RequestCounts,
    Sample,
)
from evalgate.gate import sequential
from evalgate.gate.runlog import RunLog
from evalgate.gate.verdict import GATED_METRIC
from evalgate.probe.preflight import eval_body, eval_client
from evalgate.settings.endpoint import EndpointSettings
from evalgate.settings.evaluation import EvalSettings
from evalgate.tasks.dataset import Dataset, reference_answer
from evalgate.tasks.spec import FEWSHOT_SEED, Prompt, TaskSpec, render

if TYPE_CHECKING:
    from evalgate.engine.client import EvalClient
    from evalgate.eval.dispatch import Dispatch, Progress
    from evalgate.eval.lm_eval import Evaluation
    from evalgate.evidence.model import Reply

# Simulated speculative decoding: its answers are not the model's and evalgate cannot switch it
# off, so it refuses (docs/harness.md, "Where evalgate differs on purpose" (6)).

SIMULATE_VARIABLE = "SGLANG_SIMULATE_ACC_LEN"
_ACCEPTANCE_FLAG = re.compile(r"--spec[-_]decode[-_]acceptance[-_]length(?:=|\s+|$)(\S*)")
_SHOWN = 40
"""Characters of a value repeated in a message (the rest is outside text of no use there)."""


def _off(value: str) -> bool:
    """Empty or zero (0, 0.0): SGLang simulates nothing."""
    text = value.strip()
    try:
        return not text or numbers.real(text) == 0
    except ValueError:  # not a number evalgate reads (ASCII digits): not off
        return False


def simulated_sources(
    simulate_acc_len: str | None, server_args: Sequence[tuple[str, str]]
) -> list[str]:
    """Where the job says acceptance is simulated, one phrase per source ([]: nowhere).
    `server_args` holds (server-argument string, where it came from) pairs."""
    found = []
    if simulate_acc_len is not None and not _off(simulate_acc_len):
        shown = simulate_acc_len.strip()[:_SHOWN]
        found.append(
            f"{SIMULATE_VARIABLE}={shown!r} in the gate's environment "
            "(or --sglang-simulate-acc-len)"
        )
    for args, source in server_args:
        found += [
            f"--spec-decode-acceptance-length {match.group(1)[:_SHOWN]!r} in {source}"
            for match in _ACCEPTANCE_FLAG.finditer(args)
        ]
    return found


def check_acceptance(sources: Sequence[str], *, allowed: bool) -> str | None:
    """None when nothing is simulated; the warning to record when it is and `allowed`; else
    a UsageError naming every source."""
    if not sources:
        return None
    listed = "; ".join(sources)
    if not allowed:
        raise UsageError(
            f"Speculative decoding's acceptance is simulated ({listed}): the engine accepts "
            "draft tokens at a fixed rate instead of checking them, so its answers are not the "
            "model's and no score of them means anything. Serve the eval without the "
            "simulation (the benchmark harness switches it off whenever it evaluates), or pass "
            "--allow-simulated-acceptance to gate anyway."
        )
    return (
        f"speculative acceptance is simulated ({listed}) and the gate ran anyway "
        "(--allow-simulated-acceptance): its scores say nothing about the model"
    )


# --early-stop: the filters its test reads, each answer scored as lm-eval will score it after
# the eval, and what a run that stopped keeps.

log = logging.getLogger(__name__)


def gated_filters(spec: TaskSpec) -> tuple[str, ...]:
    """The filters whose exact_match the gate reads, in the task file's order."""
    return tuple(str(entry["name"]) for entry in spec.config.get("filter_list", []))


class AnswerScorer:
    """Per filter: is this response right for this doc? (lm-eval's filters and exact_match.)"""

    def __init__(self, spec: TaskSpec) -> None:
        import lm_eval.filters  # noqa: F401 - importing it registers the filters
        from lm_eval.api.registry import get_filter, get_metric

        self._target = str(spec.config["doc_to_target"])
        self._pipelines = {
            str(entry["name"]): [
                get_filter(step["function"])(**{k: v for k, v in step.items() if k != "function"})
                for step in entry["filter"]
            ]
            for entry in spec.config.get("filter_list", [])
        }
        settings = next(m for m in spec.config["metric_list"] if m["metric"] == GATED_METRIC)
        self._metric = get_metric(GATED_METRIC)
        self._metric_kwargs = {
            key: value
            for key, value in settings.items()
            if key not in ("metric", "aggregation", "higher_is_better")
        }

    def __call__(self, doc: dict[str, Any], response: str) -> dict[str, bool]:
        """{filter: right} for one response."""
        gold = render(self._target, doc)
        found = {}
        for name, pipeline in self._pipelines.items():
            values: Any = [[response]]  # the filter's reading of the response
            for step in pipeline:
                values = list(step.apply(values, [doc]))
            score = self._metric(
                references=[gold], predictions=[str(values[0])], **self._metric_kwargs
            )
            found[name] = float(score[GATED_METRIC]) == 1.0
        return found


def settle(
    evaluation: Evaluation, sent: Dispatch, test: sequential.SequentialTest
) -> tuple[Evaluation, EarlyStopRecord]:
    """(the evaluation to keep, eval.early_stop): a stopped run keeps the questions it read."""
    from evalgate.eval.lm_eval import prefix_result

    live = sent.reader.current() if sent.reader is not None else None
    questions = len(sent.dispatched)
    read = live.n if live is not None and live.outcome is not None else questions
    scored = {s.doc_id: s.filters for s in evaluation.samples if s.error is None}
    verdicts = [  # each question's per filter as lm-eval scored it (None: no answer came)
        None
        if (found := scored.get(doc_id)) is None
        else {name: name in found and found[name].correct for name in test.filters}
        for doc_id in sent.dispatched[:read]
    ]
    checked = sequential.replay(test, verdicts)
    if live is not None and (checked.outcome, checked.n) != (live.outcome, live.n):
        raise EvalFailedError(
            f"the early stop could not be confirmed: scoring each answer as it arrived gave "
            f"{live.outcome or 'no decision'} after {live.n} answers, lm-eval's scoring of the "
            f"same answers gives {checked.outcome or 'no decision'} after {checked.n}. This is "
            "an evalgate bug (please report it); rerun with --early-stop off."
        )
    kept = EarlyStopRecord(
        mode=test.mode,
        alpha=test.alpha,
        prior_weight=test.weight,
        order_seed=sequential.ORDER_SEED if test.active else None,
        stopped=checked.outcome is not None,
        decision=checked.outcome,
        questions=questions,
        questions_used=checked.n,
        questions_asked=sent.asked,
        filters=[
            FilterEvidence(
                filter=state.filter,
                right=state.right,
                n=state.n,
                e_value=None if math.isinf(state.e_value) else state.e_value,
                certain=state.certain,
            )
            for state in checked.filters
        ],
    )
    if checked.outcome is None:
        return evaluation, kept
    log.info("%s", checked.reason(test.threshold, questions, test.alpha))
    return prefix_result(evaluation, sent.dispatched[: checked.n]), kept


# The stage.


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
            filters = gated_filters(spec)
            test = sequential.SequentialTest(floor, filters, mode=ask.early_stop, alpha=ask.alpha)
        sent = self.dispatch = self._dispatch(max_tokens, answers, kept, test)
        if test is None:  # the answers flow while lm-eval loads and builds its contexts
            from evalgate.eval.dispatch import Request

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

            from evalgate.eval.lm_eval import GateLM, run_eval

            run.eval = msgspec.structs.replace(recorded, lm_eval_version=lm_eval.__version__)
            sent.scorer = AnswerScorer(spec) if test is not None else None
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
        test: sequential.SequentialTest | None,
    ) -> Dispatch:
        from evalgate.engine.client import EvalClient
        from evalgate.engine.workers import WorkerWatch
        from evalgate.eval.dispatch import Dispatch
        from evalgate.eval.replies import InlineThinking, Replies

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
        self, evaluation: Evaluation, sent: Dispatch, test: sequential.SequentialTest | None
    ) -> Evaluation:
        """An early stop settled; the samples and lm-eval's raw results written."""
        run, stopped = self.run, False
        if test is not None:
            evaluation, record = settle(evaluation, sent, test)
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
