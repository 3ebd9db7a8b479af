"""What the stages before the eval record in result.json: the config's labels, the endpoint,
the context, the probe; and the error that stopped a run."""

from __future__ import annotations

from typing import Literal

from evalgate.evidence.fields import Api, Positive, Record
from evalgate.lengths import Limit


class ErrorRecord(Record, kw_only=True, frozen=True):
    type: str
    message: str


class Labels(Record, kw_only=True, frozen=True):
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
    budget_policy: Literal["fit", "harness", "forced"]
    requested: int | None = None
    native: Limit | None = None
    served: list[Limit]
    prompt_tokens: Limit | None = None
    steps: list[str]


class ProbeRecord(Record, kw_only=True, frozen=True):
    outcome: Literal["ok", "truncation_risk", "rejected", "skipped"]
    status_code: int | None = None
    engine_message: str | None = None
    latency_s: float | None = None
    prompt_tokens: int | None = None
    max_tokens: int | None = None
    doc_id: int | None = None
