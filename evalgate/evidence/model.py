"""The evidence, typed: result.json, one line of samples.jsonl, and hook.json.

Every stage returns typed values; ``gate.record.build_result`` turns them into one
``Result``; ``evidence.artifacts`` is the one writer and the one reader of these files, for
run, hook, verify and compare alike. The JSON schemas in ``evalgate/schemas`` stay the contract:
the tests hold every document this model writes against them, and the reader checks a file
against its schema before it decodes it.

    Result                       result.json (schema evalgate.result/1)
    ├── Labels                   the benchmark config: model prefix, hardware, ..., topology
    ├── EndpointRecord           where the engine was, and what it said it is
    ├── ContextRecord            EVAL_MAX_MODEL_LEN, the budget, every source (Limit)
    ├── ProbeRecord              the pre-flight request's outcome
    ├── EvalRecord               a Protocol (task, API, budget, data set) and RequestCounts,
    │   └── EarlyStopRecord      --early-stop: the sequential test, where it stopped
    ├── Score, Check             lm-eval's scores, each gated one against its threshold
    └── VerdictRecord            the gate rule's decision and its parameters
    Sample                       one line of samples.jsonl: a question, its Reply, per filter
    HookSummary                  hook.json: every concurrency of an `evalgate hook` call
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar

import msgspec

RESULT_SCHEMA = "evalgate.result/1"

Status = Literal["pass", "fail", "inconclusive", "error", "aborted", "running"]
"""pass/fail/inconclusive: a verdict on scores; error: could not measure; aborted: stopped by a
signal; running: written while the run is in progress (a run killed outright stays so)."""
Stage = Literal[
    "settings",
    "context",
    "dataset",
    "thresholds",
    "readiness",
    "probe",
    "eval",
    "gate",
    "artifacts",
    "done",
]
Outcome = Literal["pass", "fail", "inconclusive"]
Api = Literal["chat", "completions"]


class _Record(msgspec.Struct, kw_only=True, frozen=True):
    """A part of the evidence: immutable once built, written with every key present."""


class ErrorRecord(_Record, kw_only=True, frozen=True):
    type: str
    message: str


class Labels(_Record, kw_only=True, frozen=True):
    """The config a result belongs to: with the model, it identifies the run in a sweep."""

    model_prefix: str | None = None
    hardware: str | None = None
    framework: str | None = None
    precision: str | None = None
    kv_cache_dtype: str | None = None
    isl: int | None = None
    osl: int | None = None
    concurrency: int | None = None
    topology: dict[str, str | int | bool | None] | None = None


LABEL_NAMES: tuple[str, ...] = Labels.__struct_fields__
"""The labels that, with the model, identify a config."""


class EngineRecord(_Record, kw_only=True, frozen=True):
    owned_by: str | None = None
    version: str | None = None
    model_root: str | None = None


class EndpointRecord(_Record, kw_only=True, frozen=True):
    base_url: str | None
    api: Api
    worker_urls: list[str] = []
    engine: EngineRecord = EngineRecord()


class Limit(_Record, kw_only=True, frozen=True):
    """A length and where it came from."""

    value: int
    source: str


class ContextRecord(_Record, kw_only=True, frozen=True):
    eval_max_model_len: int
    max_tokens: int
    budget_policy: Literal["fit", "harness", "forced"]
    requested: int | None = None
    native: Limit | None = None
    served: list[Limit]
    prompt_tokens: Limit | None = None
    steps: list[str]


class ProbeRecord(_Record, kw_only=True, frozen=True):
    outcome: Literal["ok", "truncation_risk", "rejected", "skipped"]
    status_code: int | None = None
    engine_message: str | None = None
    latency_s: float | None = None
    prompt_tokens: int | None = None
    max_tokens: int | None = None
    doc_id: int | None = None


class DatasetRecord(_Record, kw_only=True, frozen=True):
    source: Literal["bundled", "dir", "hub"]
    location: str | None = None
    sha256: dict[str, str]


class TokenSpread(_Record, kw_only=True, frozen=True):
    """Tokens per answer over the answers that reported them."""

    answers: int
    median: float
    p95: float
    max: int


class RequestCounts(_Record, kw_only=True, frozen=True):
    """What happened to the eval's requests."""

    total: int = 0
    completed: int = 0
    failed: int = 0
    retried: int = 0
    truncated: int = 0
    empty: int = 0
    resumed: int = 0
    from_reasoning: int = 0
    """Answers taken from the reasoning field (content null or empty)."""
    cut_while_thinking: int = 0
    """Answers that ran out of budget while thinking: no content, finish_reason length."""
    reasoning_tokens: TokenSpread | None = None
    """Reasoning tokens per answer, where the engine reports them."""


class FilterEvidence(_Record, kw_only=True, frozen=True):
    """One gated filter in the sequential test: its count and its evidence."""

    filter: str
    right: int
    n: int
    e_value: float | None
    """E_n(threshold), the evidence against the threshold (None: beyond a float)."""
    certain: Literal["above", "below"] | None = None


class EarlyStopRecord(_Record, kw_only=True, frozen=True):
    """--early-stop: the sequential test (gate/sequential.py) and where it stopped."""

    mode: Literal["off", "fail", "pass", "both"]
    alpha: float
    prior_weight: float
    order_seed: int | None = None
    """Seed of the dispatch order (None: the questions were sent in order)."""
    stopped: bool
    decision: Literal["pass", "fail"] | None
    questions: int
    questions_used: int
    """Answers read, in dispatch order, when the test stopped (all of them when it did not);
    the scores and samples of a stopped run cover these questions only."""
    questions_asked: int
    filters: list[FilterEvidence]


class Protocol(_Record, kw_only=True, frozen=True):
    """What decides which questions are asked and how: two runs compare only under one
    protocol, and a journal's answers are reused (--resume) only under the same one.

    The fields that may be absent from a result.json (the schema requires only task, api,
    num_fewshot, max_tokens and dataset) read as None; evalgate always writes them.
    """

    task: str
    task_version: str | None = None
    task_sha256: str | None = None
    api: Api
    num_fewshot: int
    fewshot_seed: int | None = None
    max_tokens: int
    temperature: float | None = None
    limit: int | None = None
    dataset: DatasetRecord


class EvalRecord(Protocol, kw_only=True, frozen=True):
    """The eval: its protocol, how it was sent, and what happened to its requests."""

    num_concurrent: int | None = None
    chat_template_kwargs: dict[str, Any] | None = None
    reasoning_effort: str | None = None
    questions: int | None = None
    lm_eval_version: str | None = None
    requests: RequestCounts
    early_stop: EarlyStopRecord | None = None


class Score(_Record, kw_only=True, frozen=True):
    """One metric under one filter, as lm-eval reports it."""

    task: str
    metric: str
    filter: str
    value: float
    stderr: float | None
    n: int


class ThresholdRecord(_Record, kw_only=True, frozen=True):
    value: float
    matched: str
    file: str | None = None


class Check(_Record, kw_only=True, frozen=True):
    """One gated score against its threshold: the interval, and what it decided."""

    metric: str
    filter: str
    value: float
    threshold: float
    passed: bool
    n: int | None = None
    low: float | None = None
    high: float | None = None
    outcome: Outcome | None = None


class VerdictRecord(_Record, kw_only=True, frozen=True):
    """The gate rule's decision and what it was given, so `verify` reaches the same one."""

    outcome: Outcome
    reason: str
    min_samples: int
    problems: list[str] = []
    """Run-level reasons to fail besides the scores (truncated answers over the limit, a
    regression against --baseline)."""
    doubts: list[str] = []
    """Run-level reasons the run cannot pass yet (a comparison with --baseline that could not
    decide)."""


class Result(_Record, kw_only=True, frozen=True):
    """result.json: one gate run, complete on every path (the stages not reached are null)."""

    schema: str = RESULT_SCHEMA
    evalgate_version: str
    run_id: str
    status: Status
    stage: Stage
    reason: str
    error: ErrorRecord | None = None
    exit_code: int
    started_at: str
    finished_at: str | None
    timings: dict[str, float]
    model: str | None
    labels: Labels
    endpoint: EndpointRecord | None = None
    context: ContextRecord | None = None
    probe: ProbeRecord | None = None
    eval: EvalRecord | None = None
    scores: list[Score] = []
    threshold: ThresholdRecord | None = None
    checks: list[Check] = []
    verdict: VerdictRecord | None = None
    warnings: list[str] = []
    files: dict[str, str | None] = {}


class Answer(_Record, kw_only=True, frozen=True):
    """One filter's reading of one response."""

    extracted: str
    correct: bool


class Reply(_Record, kw_only=True, frozen=True):
    """The engine's answer to one question, as the eval received it (or why there is none):
    recorded by the dispatch, kept in journal.jsonl for --resume, written in samples.jsonl."""

    doc_id: int
    prompt_sha256: str
    """The sha256 of the request body: the journal's key."""
    response: str | None
    finish_reason: str | None
    completion_tokens: int | None = None
    answer_field: str | None = None
    """Which field of the engine's message held the answer: content, or (a reasoning model cut
    while thinking) reasoning_content or reasoning."""
    reasoning: str | None = None
    """A reasoning model's thinking, as its engine sent it."""
    reasoning_tokens: int | None = None
    error: str | None = None


class Sample(Reply, kw_only=True, frozen=True):
    """One line of samples.jsonl: a question, the engine's reply, and how it scored."""

    question: str
    target: str
    filters: dict[str, Answer] = {}
    cluster: int | None = None
    """For a task that asks each question more than once (GPQA-diamond: twice): the doc_id of
    the question's first asking, shared by all its repeats. None when questions are not
    repeated."""
    repeat: int | None = None
    """Which asking of its question this is (the doc's repeat_id: 0, 1, ...); None when
    questions are not repeated."""

    @classmethod
    def of(
        cls,
        reply: Reply,
        *,
        question: str,
        target: str,
        filters: dict[str, Answer] | None = None,
        cluster: int | None = None,
        repeat: int | None = None,
    ) -> Sample:
        """The reply to a question, with the question, its target and how it scored."""
        return cls(
            **msgspec.structs.asdict(reply),
            question=question,
            target=target,
            filters=filters or {},
            cluster=cluster,
            repeat=repeat,
        )


class HookRun(_Record, kw_only=True, frozen=True):
    """One concurrency of a hook call."""

    concurrency: int
    status: Literal["pass", "fail", "inconclusive", "error", "aborted", "running", "not run"]
    reason: str
    exit_code: int | None = None
    stage: str | None = None
    result: str | None = None


class HookSummary(_Record, kw_only=True, frozen=True):
    """hook.json: which concurrencies completed, and why the others did not."""

    concurrencies: list[int]
    completed: list[int]
    runs: list[HookRun]
    stopped: str | None = None


def to_document(record: _Record) -> Any:
    """The record as plain JSON values (dicts, lists, strings, numbers), every key present."""
    return msgspec.to_builtins(record)


RecordT = TypeVar("RecordT", bound=_Record)


def from_document(document: Any, kind: type[RecordT]) -> RecordT:
    """A record from plain JSON values (already checked against its schema)."""
    return msgspec.convert(document, kind)
