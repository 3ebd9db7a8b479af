"""What the stages before the eval record in result.json: the config's labels, the endpoint,
the context, the probe; and the error that stopped a run."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from evalgate.evidence.fields import Api, Integer, Positive, Record
from evalgate.lengths import Limit


class ErrorRecord(Record, kw_only=True, frozen=True):
    type: str
    message: str


class Labels(Record, kw_only=True, frozen=True):
    """The config a result belongs to: with the model, it identifies the run in a sweep."""

    model_prefix: Annotated[
        str | None, Meta(description="The model family's key for thresholds (dsr1, gptoss, ...)")
    ] = None
    hardware: str | None = None
    framework: str | None = None
    precision: str | None = None
    kv_cache_dtype: str | None = None
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
