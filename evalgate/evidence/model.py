"""The evidence contract: result.json, one line of samples.jsonl, and hook.json; the schemas and
the reader follow from it. Its types, drawn: docs/architecture.md, "The evidence contract".
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from evalgate.evidence.fields import (
    Amount,
    AnswerField,
    Api,
    Count,
    Fraction,
    HookStatus,
    Integer,
    Positive,
    Record,
    Stage,
    Status,
)
from evalgate.evidence.request_counts import RequestCounts
from evalgate.evidence.stage_records import (
    ContextRecord,
    EndpointRecord,
    ErrorRecord,
    Labels,
    ProbeRecord,
)

RESULT_SCHEMA: Final = "evalgate.result/1"

Outcome = Literal["pass", "fail", "inconclusive"]

LABEL_NAMES: tuple[str, ...] = Labels.__struct_fields__
"""The labels that, with the model, identify a config."""


class DatasetRecord(Record, kw_only=True, frozen=True):
    source: Literal["bundled", "dir", "hub"]
    location: str | UnsetType = UNSET
    sha256: dict[str, str]


class FilterEvidence(Record, kw_only=True, frozen=True):
    """One gated filter in the sequential test: its count and its evidence."""

    filter: str
    right: Count
    n: Count
    e_value: Annotated[
        Amount | None,
        Meta(
            description="E_n(threshold), the evidence against the threshold (null: beyond a float)"
        ),
    ]
    certain: Literal["above", "below"] | None = None


class EarlyStopRecord(Record, kw_only=True, frozen=True):
    """--early-stop: the sequential test and where it stopped. A stopped run's scores and
    samples cover the questions_used questions read (in dispatch order), not the whole set."""

    mode: Literal["off", "fail", "pass", "both"]
    alpha: Annotated[float, Meta(gt=0, lt=1)]
    prior_weight: Annotated[float, Meta(gt=0)]
    order_seed: Integer | None = None
    stopped: bool
    decision: Literal["pass", "fail"] | None
    questions: Count
    questions_used: Annotated[
        Count,
        Meta(
            description="Answers read, in dispatch order, when the test stopped (all: it did not)"
        ),
    ]
    questions_asked: Count
    filters: list[FilterEvidence]


class Protocol(Record, kw_only=True, frozen=True):
    """What decides which questions are asked and how: two runs compare only under one
    protocol, and a journal's answers are reused (--resume) only under the same one."""

    task: str
    task_version: str | UnsetType = UNSET
    task_sha256: str | UnsetType = UNSET
    api: Api
    num_fewshot: Integer
    fewshot_seed: Integer | UnsetType = UNSET
    max_tokens: Positive
    temperature: float | UnsetType = UNSET
    limit: Integer | None = None
    dataset: DatasetRecord


class EvalRecord(Protocol, kw_only=True, frozen=True):
    """The eval: its protocol, how it was sent, and what happened to its requests."""

    num_concurrent: Positive | UnsetType = UNSET
    chat_template_kwargs: dict[str, Any] | None = None
    reasoning_effort: str | None = None
    questions: Count | UnsetType = UNSET
    lm_eval_version: str | None = None
    requests: RequestCounts
    early_stop: EarlyStopRecord | None = None


class Score(Record, kw_only=True, frozen=True):
    """One metric under one filter, as lm-eval reports it: a measurement."""

    task: str
    metric: str
    filter: str
    value: Fraction
    stderr: float | None
    n: Count


class ThresholdRecord(Record, kw_only=True, frozen=True):
    value: Fraction
    matched: str
    file: str | None = None


class Check(Record, kw_only=True, frozen=True):
    """The gate rule's judgment of one Score (rules/verdict.py), beside the score's metric,
    filter, value and n."""

    metric: str
    filter: str
    value: float
    threshold: float
    passed: Annotated[bool, Meta(description="Whether the outcome is pass")]
    n: Count | None = None
    low: Annotated[float | None, Meta(description="The 95% Wilson interval's lower bound")] = None
    high: Annotated[float | None, Meta(description="The 95% Wilson interval's upper bound")] = None
    outcome: Outcome | None = None


class VerdictRecord(Record, kw_only=True, frozen=True):
    """The gate rule's decision and what it was given, so `verify` reaches the same one."""

    outcome: Outcome
    reason: str
    min_samples: Annotated[
        Count, Meta(description="Below this many questions a straddling score is inconclusive")
    ]
    problems: Annotated[
        list[str], Meta(description="Run-level reasons to fail besides the scores")
    ] = []
    doubts: Annotated[list[str], Meta(description="Run-level reasons the run cannot pass yet")] = []


AskedTask = Annotated[
    str,
    Meta(
        description="The task the run was asked for, from its first write on: a built-in's "
        "name, a task file's task once the file is read, the file's path (as given) before. "
        "Absent (a result before 0.2.0): the eval's task, and with no eval gsm8k"
    ),
]


class Result(Record, kw_only=True, frozen=True):
    """One gate run: what was derived, probed, evaluated and decided. Written on every path
    (success, each failure, interruption); the stages not reached are null."""

    schema: Literal["evalgate.result/1"]
    evalgate_version: str
    run_id: Annotated[str, Meta(min_length=1)]
    status: Annotated[
        Status,
        Meta(
            description="pass/fail/inconclusive: a verdict on scores; error: could not measure; "
            "aborted: stopped by a signal; running: written while the run is in progress"
        ),
    ]
    stage: Stage
    reason: str
    error: ErrorRecord | None = None
    exit_code: Count
    started_at: str
    finished_at: str | None
    timings: dict[str, Amount]
    model: str | None
    labels: Labels
    task: AskedTask | UnsetType = UNSET
    endpoint: EndpointRecord | None = None
    context: ContextRecord | None = None
    probe: ProbeRecord | None = None
    eval: EvalRecord | None = None
    scores: list[Score]
    threshold: ThresholdRecord | None = None
    checks: list[Check]
    verdict: VerdictRecord | None = None
    warnings: list[str]
    files: dict[str, str | None] = {}


class Answer(Record, kw_only=True, frozen=True):
    """One filter's reading of one response."""

    extracted: str
    correct: bool


class Reply(Record, kw_only=True, frozen=True):
    """The engine's answer to one question, as the eval received it (or why there is none):
    recorded by the dispatch, kept in journal.jsonl for --resume, written in samples.jsonl."""

    doc_id: Count
    prompt_sha256: str
    """The sha256 of the request body: the journal's key."""
    response: str | None
    finish_reason: str | None
    completion_tokens: Integer | None = None
    answer_field: Annotated[
        AnswerField | None,
        Meta(
            description="The field of the engine's answer that held the response: content "
            "(chat), text (completions), or reasoning_content / reasoning when a chat answer's "
            "content was null or empty"
        ),
    ] = None
    reasoning: str | None = None
    """A reasoning model's thinking, as its engine sent it."""
    reasoning_tokens: Count | None = None
    error: Annotated[str | None, Meta(description="Why no answer was obtained (counted as failed)")]


class Sample(Reply, kw_only=True, frozen=True):
    """One line of samples.jsonl: a question, the engine's reply, and how it scored."""

    question: str
    target: str
    filters: dict[str, Answer]
    cluster: Annotated[
        Count | None,
        Meta(
            description="For a task asking each question more than once (GPQA-diamond: "
            "twice): the doc_id of the question's first asking; null when not repeated"
        ),
    ] = None
    repeat: Annotated[
        Count | None,
        Meta(description="Which asking of its question this is (0, 1, ...); null when not"),
    ] = None


class HookRun(Record, kw_only=True, frozen=True):
    """One concurrency of a hook call."""

    concurrency: Positive
    status: HookStatus
    reason: str
    exit_code: Annotated[
        Count | None, Meta(description="evalgate run's exit code (null: not run)")
    ] = None
    stage: Annotated[str | None, Meta(description="The last stage the run reached")] = None
    result: Annotated[
        str | None, Meta(description="The run's result.json, relative to hook.json's folder")
    ] = None


class HookSummary(Record, kw_only=True, frozen=True):
    """hook.json: which concurrencies completed, and why the others did not."""

    concurrencies: list[Positive]
    completed: list[Positive]
    runs: list[HookRun]
    stopped: Annotated[
        str | None, Meta(description="Why the hook stopped before running every concurrency")
    ]


def to_document(record: msgspec.Struct) -> Any:
    """The record as plain JSON values (dicts, lists, strings, numbers), every key present
    (but those absent as UNSET)."""
    return msgspec.to_builtins(record)
