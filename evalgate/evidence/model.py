"""The evidence contract: result.json, one line of samples.jsonl, and hook.json, down to a length
in tokens with where it came from (Limit); the schemas and the reader follow from it. Its types,
drawn: docs/architecture.md, "The evidence contract".
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType


class Limit(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A length in tokens and where it came from (result.json records them as found)."""

    value: Count
    source: str


# The building blocks: bounded numbers, the names a field may hold, the base record.

INT64 = 2**63
"""Every integer of a typed document is below this in magnitude, as every count and length
evalgate writes is: msgspec refuses one past it as it decodes, naming its JSON path (arithmetic
on it would overflow wherever it went next). Plain values are reader.py's to bound."""
Integer = Annotated[int, Meta(ge=-INT64, le=INT64 - 1)]
Count = Annotated[int, Meta(ge=0, le=INT64 - 1)]
Positive = Annotated[int, Meta(ge=1, le=INT64 - 1)]
Fraction = Annotated[float, Meta(ge=0, le=1)]
Delta = Annotated[float, Meta(ge=-1, le=1)]
"""A difference of two fractions (a candidate's score minus its baseline's)."""
Amount = Annotated[float, Meta(ge=0)]

Status = Literal["pass", "fail", "inconclusive", "error", "aborted", "running"]
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
Api = Literal["chat", "completions"]
AnswerField = Literal["content", "reasoning_content", "reasoning", "text"]
HookStatus = Literal["pass", "fail", "inconclusive", "error", "aborted", "running", "not run"]


class Record(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """A part of the evidence: immutable once built, written with every key present."""


# What happened to the eval's requests, as result.json counts them (eval.requests).


class TokenSpread(Record, kw_only=True, frozen=True):
    """Tokens per answer over the answers that reported them."""

    answers: Positive
    median: Amount
    p95: Amount
    max: Count


class RequestCounts(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):  # counted up
    """What happened to the eval's requests."""

    total: Count
    completed: Count
    failed: Count
    retried: Count = 0
    truncated: Count
    empty: Count
    resumed: Count = 0
    from_reasoning: Annotated[
        Count, Meta(description="Answers taken from the reasoning field (content null or empty)")
    ] = 0
    cut_while_thinking: Annotated[
        Count,
        Meta(
            description="Answers that ran out of the output budget while still thinking: no "
            "content, finish_reason length; or thinking written into the answer that never "
            "reached its end marker (also counted in truncated)"
        ),
    ] = 0
    inline_thinking: Annotated[
        Count,
        Meta(
            description="Answers that wrote their thinking into the answer (<think>...</think>, "
            "no reasoning parser): only the text after the end marker was scored"
        ),
    ] = 0
    reasoning_tokens: Annotated[
        TokenSpread | None,
        Meta(description="Reasoning tokens per answer, where the engine reports them (null: none)"),
    ] = None

    @classmethod
    def zero(cls) -> RequestCounts:
        return cls(total=0, completed=0, failed=0, truncated=0, empty=0)


# What the stages before the eval record in result.json: the config's labels, the endpoint,
# the context, the probe; and the error that stopped a run.


class ErrorRecord(Record, kw_only=True, frozen=True):
    type: str
    message: str


class ConfigLabels(Record, kw_only=True, frozen=True):
    """The labels a thresholds file matches besides the model (thresholds.Label)."""

    model_prefix: Annotated[
        str | None, Meta(description="The model family's key for thresholds (dsr1, gptoss, ...)")
    ] = None
    hardware: str | None = None
    framework: str | None = None
    precision: str | None = None
    kv_cache_dtype: str | None = None


class Labels(ConfigLabels, kw_only=True, frozen=True):
    """The config a result belongs to: with the model, it identifies the run in a sweep."""

    isl: Annotated[Integer | None, Meta(description="The benchmark's input length (ISL)")] = None
    osl: Annotated[Integer | None, Meta(description="The benchmark's output length (OSL)")] = None
    concurrency: Integer | None = None
    topology: Annotated[
        dict[str, str | Integer | bool | None] | None,
        Meta(description="The job's parallel layout, named as the benchmark harness names it"),
    ] = None


class EngineRecord(Record, kw_only=True, frozen=True):
    owned_by: str | None = None
    version: str | None = None
    model_root: str | None = None


class EndpointRecord(Record, kw_only=True, frozen=True):
    base_url: str | None
    api: Api
    worker_urls: list[str] = []
    engine: EngineRecord = EngineRecord()


class ContextRecord(Record, kw_only=True, frozen=True):
    eval_max_model_len: Positive
    max_tokens: Positive
    budget_policy: Annotated[
        Literal["fit", "harness", "forced"],
        Meta(description="How max_tokens was set (forced: by --max-tokens)"),
    ]
    requested: Integer | None = None
    native: Limit | None = None
    served: Annotated[list[Limit], Meta(description="The context each engine serves")]
    prompt_tokens: Limit | None = None
    steps: list[str]


class ProbeRecord(Record, kw_only=True, frozen=True):
    outcome: Literal["ok", "truncation_risk", "rejected", "skipped"]
    status_code: Integer | None = None
    engine_message: Annotated[
        str | None, Meta(description="The engine's own words when it rejected the probe")
    ] = None
    latency_s: float | None = None
    prompt_tokens: Annotated[
        Integer | None, Meta(description="The longest eval prompt's length in tokens, the probe's")
    ] = None
    max_tokens: Integer | None = None
    doc_id: Integer | None = None


# The documents, result.json, one line of samples.jsonl and hook.json, and their parts.

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
    """The gate rule's judgment of one Score (gate/verdict.py), beside the score's metric,
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
